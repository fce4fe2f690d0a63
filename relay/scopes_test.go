package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/scope"
)

// scopeOf returns an object's scope as a JSON object, as a world holds it
// ("" if the object is missing).
func scopeOf(w *gameworld.World, id, name string) string {
	o, ok := w.Get(id)
	if !ok {
		return ""
	}
	b, _ := o.Scopes.AppendJSON(nil, name)
	return string(b)
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// A grid's blocks written in bursts by a Go client reach, through a
// proxy, another Go client as element deltas (whose events, applied as
// the seed applies them, rebuild the grid) and 2016-style peers as one
// property holding the grid whole; every copy ends equal to the node's,
// with no anti-entropy repair (startNode checks).
func TestScopesThroughProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer wiretest.BusyCores()() // both cores loaded, as on slow CI machines
	const tick = 10 * time.Millisecond
	server, url := startNode(t, relay.Options{Tick: tick})
	proxy, purl := startProxy(t, url, relay.Options{Tick: tick})
	waitFor(t, "the proxy's upstream", 10*time.Second, func() bool { return upstreamConnected(proxy) })
	owner := dialTick(t, ctx, url, tick)
	watcher := dialTick(t, ctx, purl, tick)
	old := wiretest.Dial(t, url, "legacy-server", wiretest.Options{})
	oldBehind := wiretest.Dial(t, purl, "legacy-proxy", wiretest.Options{})

	// The watcher rebuilds the grid from element events alone.
	var mu sync.Mutex
	rebuilt := map[string]scope.Fields{}
	cancelSub := watcher.Subscribe(func(e client.Event) {
		mu.Lock()
		defer mu.Unlock()
		e.Elements(func(ev client.ElementEvent) {
			switch {
			case ev.Reset:
				clear(rebuilt)
			case ev.Kind == scope.Removed:
				delete(rebuilt, ev.ID)
			case ev.Kind == scope.Added:
				rebuilt[ev.ID] = ev.Fields
			case ev.Kind == scope.Modified:
				f := scope.Fields{}
				for k, v := range rebuilt[ev.ID] {
					f[k] = v
				}
				for k, v := range ev.Fields {
					f[k] = v
				}
				rebuilt[ev.ID] = f
			}
		})
	})
	defer cancelSub()

	const grid = "grid-1"
	if err := owner.CreateWithID(grid, props{"position": []float64{0, 0, 0}, "kind": "grid"}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	colors := []string{"red", "green", "blue", "stone"}
	for burst := range 40 {
		for range 1 + rng.IntN(20) {
			x, y, z := rng.IntN(8), rng.IntN(8), rng.IntN(8)
			id := fmt.Sprintf("%d,%d,%d", x, y, z)
			var err error
			switch rng.IntN(5) {
			case 0:
				err = owner.RemoveElements(grid, "blocks", id)
			case 1:
				err = owner.SetElements(grid, "blocks", map[string]map[string]any{id: {"lit": rng.IntN(2) == 0}})
			default:
				err = owner.SetElements(grid, "blocks", map[string]map[string]any{id: {"c": colors[rng.IntN(len(colors))], "t": 1}})
			}
			if err != nil {
				t.Fatalf("burst %d: %v", burst, err)
			}
		}
		if burst%10 == 9 {
			time.Sleep(3 * tick)
		}
	}
	want := scopeOf(owner.World(), grid, "blocks")
	if want == "" || want == "{}" {
		t.Fatal("the owner holds no blocks")
	}
	for _, w := range []struct {
		name string
		w    *gameworld.World
	}{{"server", server.World()}, {"proxy", proxy.World()}, {"watcher", watcher.World()}} {
		waitFor(t, w.name+" holds the owner's grid", 20*time.Second, func() bool { return scopeOf(w.w, grid, "blocks") == want })
	}
	o, _ := owner.World().Get(grid)
	for _, w := range []*gameworld.World{server.World(), proxy.World(), watcher.World()} {
		if got, _ := w.Get(grid); got.Digest != o.Digest || got.Scopes.Ver("blocks") != o.Scopes.Ver("blocks") {
			t.Fatalf("%s: digest %x version %d, the owner's %x %d", w.Identifier(), got.Digest, got.Scopes.Ver("blocks"), o.Digest, o.Scopes.Ver("blocks"))
		}
	}
	mu.Lock()
	got, _ := json.Marshal(rebuilt)
	mu.Unlock()
	if !sameJSON(got, []byte(want)) {
		t.Fatalf("the watcher's events rebuilt\n%s\nthe grid is\n%s", got, want)
	}
	for _, p := range []*wiretest.Peer{old, oldBehind} {
		p.Wait("the grid whole as a property", 20*time.Second, func(objs map[string]wiretest.Object) bool {
			return sameJSON(objs[grid].Properties["blocks"], []byte(want))
		})
		p.CheckClean()
	}

	// The owner leaves: every copy loses the grid.
	owner.Close()
	waitFor(t, "the watcher loses the grid", 20*time.Second, func() bool { _, ok := watcher.World().Get(grid); return !ok })
	oldBehind.WaitGone(grid)
}

// A peer's scope changes that the node cannot take are refused whole (a
// stale or gapped delta changes nothing); malformed ones close the link.
func TestScopesBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	watcher := dialTick(t, ctx, url, 5*time.Millisecond)
	p := wiretest.Dial(t, url, "client-wwwwwwww-wwwwwwww", wiretest.Options{})
	waitFor(t, "the writer's metadata", 10*time.Second, func() bool { return chainOf(server, "client-wwwwwwww-wwwwwwww") != nil })
	p.SendRaw([]byte(`["worldChange",{"timestamp":1,"changes":[{"type":"add","id":"g","owner":"client-wwwwwwww-wwwwwwww","properties":{},"scopes":{"blocks":{"ver":3,"base":0,"added":{"a":{"c":1}}}}}]}]`))
	waitFor(t, "the grid", 10*time.Second, func() bool { return scopeOf(watcher.World(), "g", "blocks") == `{"a":{"c":1}}` })
	for _, rec := range []string{
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","properties":{"x":1},"scopes":{"blocks":{"ver":3,"base":2,"removed":["a"]}}}`, // stale
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","properties":{"x":1},"scopes":{"blocks":{"ver":9,"base":8,"removed":["a"]}}}`, // a gap
	} {
		p.SendRaw([]byte(`["worldChange",{"timestamp":1,"changes":[` + rec + `]}]`))
	}
	p.SendRaw([]byte(`["worldChange",{"timestamp":1,"changes":[{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","properties":{"y":1}}]}]`))
	waitFor(t, "the last update", 10*time.Second, func() bool { o, _ := watcher.World().Get("g"); return o.Properties.Value("y") != nil })
	if o, _ := server.World().Get("g"); o.Properties.Value("x") != nil || scopeOf(server.World(), "g", "blocks") != `{"a":{"c":1}}` || o.Scopes.Ver("blocks") != 3 {
		t.Fatalf("a refused change changed something: %v %s", o.Properties, scopeOf(server.World(), "g", "blocks"))
	}
	for _, bad := range []string{
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","scopes":[]}`,
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","scopes":{"blocks":{"base":1}}}`,
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","scopes":{"blocks":{"ver":5,"base":6}}}`,
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","scopes":{"blocks":{"ver":5,"base":4,"added":{"":{}}}}}`,
		`{"type":"update","id":"g","owner":"client-wwwwwwww-wwwwwwww","scopes":{"blocks":{"ver":5,"base":4,"nope":1}}}`,
	} {
		q := wiretest.Dial(t, url, "client-cccccccc-cccccccc", wiretest.Options{})
		waitFor(t, "the metadata", 10*time.Second, func() bool { return chainOf(server, "client-cccccccc-cccccccc") != nil })
		q.SendRaw([]byte(`["worldChange",{"timestamp":1,"changes":[` + bad + `]}]`))
		if code, reason := q.WaitClosed(10 * time.Second); code != 1007 {
			t.Errorf("%s: closed with %d %q, want 1007", bad, code, reason)
		}
	}
	if got := scopeOf(server.World(), "g", "blocks"); got != `{"a":{"c":1}}` {
		t.Fatalf("the grid changed: %s", got)
	}
}

// A persistent grid keeps its blocks and version across a restart of its
// node, and a client that joins afterwards gets it whole.
func TestScopesPersist(t *testing.T) {
	open := bolt(t)
	s := open()
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond, Store: s, ReclaimGrace: 300 * time.Millisecond})
	alice := dialClient(t, url, "alice")
	if err := alice.CreateWithID("grid", props{"persistent": true, "position": []int{0, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := alice.SetElements("grid", "blocks", map[string]map[string]any{fmt.Sprintf("%d,0,0", i%20): {"c": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.RemoveElements("grid", "blocks", "3,0,0", "4,0,0"); err != nil {
		t.Fatal(err)
	}
	want := scopeOf(alice.World(), "grid", "blocks")
	waitFor(t, "the node holds the grid", 5*time.Second, func() bool { return scopeOf(srv.World(), "grid", "blocks") == want })
	o, _ := srv.World().Get("grid")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice.Close()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := open()
	t.Cleanup(func() { s2.Close() })
	srv2, url2 := startNode(t, relay.Options{Tick: 2 * time.Millisecond, Store: s2, ReclaimGrace: 300 * time.Millisecond})
	got, ok := srv2.World().Get("grid")
	if !ok || scopeOf(srv2.World(), "grid", "blocks") != want || got.Scopes.Ver("blocks") != o.Scopes.Ver("blocks") {
		t.Fatalf("after the restart: %s version %d, want %s version %d", scopeOf(srv2.World(), "grid", "blocks"), got.Scopes.Ver("blocks"), want, o.Scopes.Ver("blocks"))
	}
	carol := dialClient(t, url2, "carol")
	waitFor(t, "carol gets the grid whole", 5*time.Second, func() bool { return scopeOf(carol.World(), "grid", "blocks") == want })
	old := wiretest.Dial(t, url2, "client-oooooooo-oooooooo", wiretest.Options{})
	old.Wait("the grid as a property", 5*time.Second, func(objs map[string]wiretest.Object) bool {
		return sameJSON(objs["grid"].Properties["blocks"], []byte(want))
	})
}

// Across a mesh, a grid reaches a client of the other member only while
// its position is inside the client's region: it enters whole, and its
// later deltas follow.
func TestScopesAcrossMeshWithInterest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer wiretest.BusyCores()()
	const tick = 5 * time.Millisecond
	nodes := startMeshWith(t, 2, cluster.Options{}, relay.Options{Tick: tick})
	owner := dialTick(t, ctx, nodes[0].url, tick)
	near, err := client.Dial(ctx, nodes[1].url, client.Options{Prefix: "near", Tick: tick, DigestInterval: testDigestInterval, Interest: []peer.Box{box(50, -10, -10, 70, 10, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer near.Close()
	everyone := dialTick(t, ctx, nodes[1].url, tick)
	if err := owner.CreateWithID("grid", props{"position": []int{0, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	write := func(n int) {
		for i := range n {
			if err := owner.SetElements("grid", "blocks", map[string]map[string]any{fmt.Sprintf("%d,%d,0", i%7, i%5): {"c": i}}); err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				owner.RemoveElements("grid", "blocks", fmt.Sprintf("%d,0,0", i%4))
			}
		}
	}
	write(40)
	want := scopeOf(owner.World(), "grid", "blocks")
	waitFor(t, "the other member's client gets the grid", 10*time.Second, func() bool { return scopeOf(everyone.World(), "grid", "blocks") == want })
	if _, ok := near.World().Get("grid"); ok {
		t.Fatal("a grid outside the region reached the client")
	}
	owner.Set("grid", props{"position": []int{60, 0, 0}})
	write(25)
	want = scopeOf(owner.World(), "grid", "blocks")
	for _, c := range []*client.Client{near, everyone} {
		waitFor(t, "the grid in the region", 10*time.Second, func() bool { return scopeOf(c.World(), "grid", "blocks") == want })
	}
	o, _ := owner.World().Get("grid")
	for _, w := range []*gameworld.World{nodes[0].node.World(), nodes[1].node.World(), near.World(), everyone.World()} {
		waitFor(t, "equal digests", 10*time.Second, func() bool { got, _ := w.Get("grid"); return got.Digest == o.Digest })
	}
}
