package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// departureFixture is a node, a watcher, and a leaver holding objects
// (several slices of them, with a few persistent ones).
type departureFixture struct {
	node           *relay.Node
	url            string
	watcher, leave *client.Client
	leaverID       string
}

func newDepartureFixture(t *testing.T, ctx context.Context, objects int) *departureFixture {
	t.Helper()
	f := &departureFixture{}
	f.node, f.url = startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	f.watcher = dialTick(t, ctx, f.url, 5*time.Millisecond)
	f.leave = dialTick(t, ctx, f.url, 5*time.Millisecond)
	f.leaverID = f.leave.Identifier()
	changes := make([]gameworld.Change, 0, objects)
	for k := range objects {
		props := gameworld.PropertiesOf(map[string]json.RawMessage{"n": []byte(fmt.Sprint(k))})
		if k%1000 == 0 {
			props = props.With(relay.PropPersistent, []byte("true"))
		}
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("leaver-%06d", k), Properties: props})
	}
	if _, err := f.leave.Node().Apply(changes); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher sees the leaver's objects", 30*time.Second, func() bool { return f.watcher.World().Len() == objects })
	return f
}

// onFirstYield runs fn (once) while the departure under way has let the
// node's lock go for the first time, and reports how many of the
// leaver's objects the node still held then.
func (f *departureFixture) onFirstYield(fn func()) (heldThen func() int) {
	var once sync.Once
	held := -1
	done := make(chan struct{})
	f.node.SetYieldHook(func() {
		once.Do(func() {
			held = f.node.World().CountOf([]string{f.leaverID})
			fn()
			close(done)
		})
	})
	return func() int {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		return held
	}
}

// await polls cond until it holds or d passes; it reports whether it
// held. (Unlike waitFor, it may run outside the test's goroutine.)
func await(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// sameWorld fails t unless c comes to hold exactly its node's world.
func sameWorld(t *testing.T, what string, n *relay.Node, c *client.Client) {
	t.Helper()
	var diff string
	if !await(30*time.Second, func() bool { diff = worldDiff(c.World(), n.World()); return diff == "" }) {
		t.Fatalf("%s: %s", what, diff)
	}
}

// TestDepartureLetsOthersIn: a world that leaves with many objects is
// removed a slice at a time, and others' changes get in between: a
// prober's object is applied while most of the leaver's objects are
// still there, and reaches the watcher; in the end the watcher holds the
// node's world (persistent objects kept, everything else gone).
func TestDepartureLetsOthersIn(t *testing.T) {
	const objects = 5 * relay.DepartSlice
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDepartureFixture(t, ctx, objects)
	prober, err := client.Dial(ctx, f.url, client.Options{Tick: peer.Immediate})
	if err != nil {
		t.Fatal(err)
	}
	defer prober.Close()
	heldThen := f.onFirstYield(func() {
		// The node's lock is free: the probe is applied now, not after
		// the departure.
		if err := prober.CreateWithID("probe", map[string]any{"n": 1}); err != nil {
			t.Error(err)
		}
		if !await(10*time.Second, func() bool { _, ok := f.node.World().Get("probe"); return ok }) {
			t.Error("the node did not apply the probe mid-departure")
		}
	})
	f.leave.Close()
	if held := heldThen(); held < objects-relay.DepartSlice {
		t.Fatalf("at the first pause the node held %d of the leaver's %d objects, want all but a slice", held, objects)
	}
	waitFor(t, "the watcher sees the probe", 10*time.Second, func() bool { _, ok := f.watcher.World().Get("probe"); return ok })
	waitFor(t, "the departure done: the leaver's objects and claim gone", 30*time.Second, func() bool {
		return !f.node.Claimed(f.leaverID) && !f.node.Departing() && f.node.World().CountOf([]string{f.leaverID}) == 0
	})
	if kept := f.node.World().CountOf([]string{f.node.Identifier()}); kept != objects/1000+1 {
		t.Errorf("the node kept %d persistent objects, want %d", kept, objects/1000+1)
	}
	sameWorld(t, "the watcher holds the node's world", f.node, f.watcher)
}

// TestReconnectDuringDeparture: a peer that comes back under the same
// identifier while its objects are being removed is let in (its old
// connection is gone: nothing holds the identifier), and starts from what
// it sends: what was left of its old objects goes first, at once, and
// none of them comes back afterwards.
func TestReconnectDuringDeparture(t *testing.T) {
	const objects = 4 * relay.DepartSlice
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDepartureFixture(t, ctx, objects)
	var back *client.Client
	heldThen := f.onFirstYield(func() {
		var err error
		back, err = client.Dial(ctx, f.url, client.Options{Identifier: f.leaverID, Tick: peer.Immediate})
		if err != nil {
			t.Error(err)
			return
		}
		for k := range 3 {
			if err := back.CreateWithID(fmt.Sprintf("again-%d", k), map[string]any{"n": k}); err != nil {
				t.Error(err)
			}
		}
		if !await(10*time.Second, func() bool { return f.node.World().CountOf([]string{f.leaverID}) == 3 }) {
			t.Errorf("the returning peer owns %d objects at the node, want its 3", f.node.World().CountOf([]string{f.leaverID}))
		}
	})
	f.leave.Close()
	if held := heldThen(); held < objects-relay.DepartSlice {
		t.Fatalf("at the first pause the node held %d of the leaver's %d objects, want all but a slice", held, objects)
	}
	if back == nil {
		t.FailNow()
	}
	defer back.Close()
	time.Sleep(100 * time.Millisecond) // what the departure would still do
	if ids := f.node.World().IDsOf(nil, []string{f.leaverID}, 0); len(ids) != 3 {
		t.Fatalf("the returning peer owns %d objects at the node, want its 3: %v", len(ids), ids[:min(len(ids), 5)])
	}
	if !back.Connected() {
		t.Fatal("the returning peer was refused")
	}
	sameWorld(t, "the watcher holds the node's world", f.node, f.watcher)
	if n := f.watcher.World().CountOf([]string{f.leaverID}); n != 3 {
		t.Errorf("the watcher holds %d objects of the returning peer, want 3", n)
	}
}

// TestDepartureAcrossMeshRepairsNothing: while a world's 30,000 objects
// leave member a a slice at a time, the other members' views lag behind
// a's by what is in flight; digests taken meanwhile must not take that
// for divergence (the nodes' cleanup fails the test on any repair). In
// the end every member and a client on each hold the same world.
func TestDepartureAcrossMeshRepairsNothing(t *testing.T) {
	nodes := startMesh(t, 3, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var watchers []*client.Client
	for _, m := range nodes {
		watchers = append(watchers, dialTick(t, ctx, m.url, 20*time.Millisecond))
	}
	leaver := dialTick(t, ctx, nodes[0].url, 20*time.Millisecond)
	const objects = 30000
	changes := make([]gameworld.Change, 0, objects)
	const persistent = 3
	for k := range objects {
		props := gameworld.PropertiesOf(map[string]json.RawMessage{"n": []byte(fmt.Sprint(k))})
		if k < persistent {
			props = props.With(relay.PropPersistent, []byte("true"))
		}
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("leaver-%06d", k), Properties: props})
	}
	if _, err := leaver.Node().Apply(changes); err != nil {
		t.Fatal(err)
	}
	for _, w := range watchers {
		waitFor(t, "every watcher holds the leaver's objects", time.Minute, func() bool { return w.World().Len() == objects })
	}
	stay, _ := watchers[1].Create(map[string]any{"stays": true})
	in := meshRecordsIn(nodes[1:], nodes[0].node.Identifier())
	leaver.Close()
	for i, w := range watchers {
		waitFor(t, "the departure everywhere", time.Minute, func() bool {
			return w.World().Len() == 1+persistent && nodes[i].node.World().Len() == 1+persistent
		})
	}
	time.Sleep(4 * testDigestInterval) // digests compare the settled views
	for i, w := range watchers {
		if _, ok := w.World().Get(stay); !ok && i != 1 {
			t.Errorf("watcher %d lacks the object that stays", i)
		}
		for k := range persistent {
			if o, ok := nodes[i].node.World().Get(fmt.Sprintf("leaver-%06d", k)); !ok || o.Owner != nodes[0].node.Identifier() {
				t.Errorf("member %d: persistent object %d is %+v, want it owned by member 0", i, k, o)
			}
		}
		sameWorld(t, "each watcher holds its member's world", nodes[i].node, w)
	}
	// The other members learnt of the departure from member 0's metadata
	// and removed the objects themselves: the removes did not cross.
	after := meshRecordsIn(nodes[1:], nodes[0].node.Identifier())
	for i := range in {
		if d := after[i] - in[i]; d > 100 {
			t.Errorf("member %d was sent %d records by member 0 during the departure of %d objects", i+1, d, objects)
		}
	}
}

// meshRecordsIn returns, for each member, the records it has read from
// its mesh link to the member with identifier from.
func meshRecordsIn(members []*meshNode, from string) []uint64 {
	out := make([]uint64, len(members))
	for i, m := range members {
		for _, l := range m.node.Links() {
			if l.Kind == "mesh" && l.Identifier == from {
				out[i] += l.RecordsIn
			}
		}
	}
	return out
}

// A world that leaves a proxy: a server of ours learns of it from the
// proxy's metadata and removes its objects itself (the removes do not go
// up), a 2016 server is sent every remove; either way the server and its
// clients end without them, and a persistent object stays, now the
// proxy's.
func TestDepartureThroughProxy(t *testing.T) {
	const objects = 5000
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "ours", true: "2016"}[legacy], func(t *testing.T) {
			var upURL string
			var held func() map[string]string // id → owner, at the server
			var recordsIn func() uint64       // read by the server from the proxy
			if legacy {
				ls := wiretest.NewLegacyServer("server-LEGACY00-LEGACY00")
				srv := httptest.NewServer(ls)
				t.Cleanup(srv.Close)
				t.Cleanup(func() {
					if cr := ls.Crashes(); len(cr) > 0 {
						t.Errorf("the 2016 server would have crashed: %v", cr)
					}
				})
				upURL = wiretest.WSURL(srv)
				held = func() map[string]string {
					out := map[string]string{}
					for id, o := range ls.Objects() {
						out[id] = o.Owner
					}
					return out
				}
			} else {
				s, url := startNode(t, relay.Options{})
				upURL = url
				held = func() map[string]string {
					out := map[string]string{}
					s.World().Range(func(o gameworld.Object) bool { out[o.ID] = o.Owner; return true })
					return out
				}
				recordsIn = func() (n uint64) {
					for _, l := range s.Links() {
						if l.Kind == "downstream" && l.Role == "proxy" {
							n += l.RecordsIn
						}
					}
					return n
				}
			}
			p, purl := startProxy(t, upURL, relay.Options{})
			watcher := wiretest.Dial(t, upURL, "watch-WWWWWWWW-WWWWWWWW", wiretest.Options{})
			leaver := wiretest.Dial(t, purl, "leaver-LLLLLLLL-LLLLLLLL", wiretest.Options{})
			recs := make([]map[string]any, objects)
			for i := range recs {
				pr := map[string]any{"i": i}
				if i == 0 {
					pr[relay.PropPersistent] = true
				}
				recs[i] = wiretest.Add(fmt.Sprintf("l-%05d", i), leaver.ID, pr)
			}
			leaver.Change(recs...)
			waitFor(t, "the server holds the leaver's objects", 30*time.Second, func() bool { return len(held()) == objects })
			var before uint64
			if recordsIn != nil {
				before = recordsIn()
			}
			leaver.Close()
			waitFor(t, "the departure at the server", 30*time.Second, func() bool {
				h := held()
				return len(h) == 1 && h["l-00000"] == p.Identifier()
			})
			watcher.Wait("the watcher's view", 10*time.Second, func(objs map[string]wiretest.Object) bool {
				return len(objs) == 1 && objs["l-00000"].Owner == p.Identifier()
			})
			if recordsIn != nil {
				if d := recordsIn() - before; d > 100 {
					t.Errorf("the proxy sent the server %d records for the departure of %d objects", d, objects)
				}
			}
			watcher.CheckClean()
		})
	}
}
