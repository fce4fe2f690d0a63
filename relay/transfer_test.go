package relay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

func dialClient(t *testing.T, url, prefix string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{Prefix: prefix, Tick: 2 * time.Millisecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ownerIs waits until every world names owner as the owner of id.
func ownerIs(t *testing.T, id, owner string, worlds ...*gameworld.World) {
	t.Helper()
	waitFor(t, "owner "+owner+" of "+id+" everywhere", 5*time.Second, func() bool {
		for _, w := range worlds {
			if o, ok := w.Get(id); !ok || o.Owner != owner {
				return false
			}
		}
		return true
	})
}

// TestTransferGrantAndRefuse: a client takes an object marked
// transferable and its owner hears it lost; an unmarked one is refused;
// the old owner's writes are refused everywhere afterwards, and the new
// owner's accepted; a 2016-style peer sees the owner change as a remove
// and, in a later message, an add, and nothing it does not understand.
func TestTransferGrantAndRefuse(t *testing.T) {
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	alice, bob := dialClient(t, url, "alice"), dialClient(t, url, "bob")
	legacy := wiretest.Dial(t, url, "legacy-2016", wiretest.Options{})
	var mu sync.Mutex
	var aliceEvents []client.Event
	alice.Subscribe(func(e client.Event) {
		mu.Lock()
		aliceEvents = append(aliceEvents, e)
		mu.Unlock()
	})
	ball, _ := alice.Create(map[string]any{"kind": "ball", "transferable": true, "x": 1})
	rock, _ := alice.Create(map[string]any{"kind": "rock", "x": 1})
	waitFor(t, "bob and the 2016 peer see both", 5*time.Second, func() bool {
		_, b1 := bob.World().Get(ball)
		_, b2 := bob.World().Get(rock)
		objs := legacy.Objects()
		return b1 && b2 && objs[ball].Owner == alice.Identifier() && objs[rock].Owner != ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := bob.TakeOwnership(ctx, ball); err != nil {
		t.Fatalf("take the ball: %v", err)
	}
	ownerIs(t, ball, bob.Identifier(), srv.World(), alice.World(), bob.World())
	if err := bob.TakeOwnership(ctx, rock); !errors.Is(err, relay.ErrTransferRefused) {
		t.Fatalf("take the rock: %v, want refused", err)
	}
	ownerIs(t, rock, alice.Identifier(), srv.World(), bob.World())
	waitFor(t, "alice hears she lost the ball", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range aliceEvents {
			if e.ID == ball && e.Lost && e.Owner == bob.Identifier() {
				return true
			}
		}
		return false
	})

	// The new owner writes; the old one cannot, not even with a raw
	// record that names herself as owner.
	if err := bob.Set(ball, map[string]any{"x": 2}); err != nil {
		t.Fatal(err)
	}
	if err := alice.Set(ball, map[string]any{"x": 99}); err == nil {
		t.Fatal("alice's client let her write the ball she lost")
	}
	thief := wiretest.Dial(t, url, alice.Identifier()+"-not", wiretest.Options{})
	thief.Change(wiretest.Update(ball, alice.Identifier(), map[string]any{"x": 98}))
	waitFor(t, "bob's write everywhere", 5*time.Second, func() bool {
		o, _ := alice.World().Get(ball)
		return string(o.Properties.Value("x")) == "2" && string(legacy.Objects()[ball].Properties["x"]) == "2"
	})
	time.Sleep(50 * time.Millisecond)
	if o, _ := srv.World().Get(ball); string(o.Properties.Value("x")) != "2" || o.Owner != bob.Identifier() {
		t.Fatalf("server's ball %+v", o)
	}

	// The 2016 peer: the owner change as remove then add, in two messages.
	legacy.Wait("the 2016 peer sees bob own the ball", 5*time.Second, func(objs map[string]wiretest.Object) bool {
		return objs[ball].Owner == bob.Identifier()
	})
	if v := legacy.Violations(); len(v) > 0 {
		t.Fatalf("the 2016 peer saw: %v", v)
	}
	removeAt, addAt := -1, -1
	for i, m := range legacy.Messages() {
		s := string(m.Data)
		if strings.Contains(s, `"transfer"`) {
			t.Fatalf("the 2016 peer was sent %s", s)
		}
		if strings.Contains(s, `"type":"remove","id":"`+ball+`","owner":"`+alice.Identifier()+`"`) {
			removeAt = i
		}
		if removeAt >= 0 && addAt < 0 && strings.Contains(s, `"type":"add","id":"`+ball+`","owner":"`+bob.Identifier()+`"`) {
			addAt = i
		}
	}
	if removeAt < 0 || addAt <= removeAt {
		t.Fatalf("the 2016 peer did not see a remove then a later add (remove in message %d, add in %d)", removeAt, addAt)
	}

	// Bob releases the ball to the server, and alice takes it back.
	if err := bob.Release(ctx, ball); err != nil {
		t.Fatal(err)
	}
	ownerIs(t, ball, srv.Identifier(), srv.World(), alice.World(), bob.World())
	if err := alice.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	ownerIs(t, ball, alice.Identifier(), srv.World(), alice.World(), bob.World())
	legacy.Wait("the 2016 peer follows", 5*time.Second, func(objs map[string]wiretest.Object) bool {
		return objs[ball].Owner == alice.Identifier()
	})
	if v := legacy.Violations(); len(v) > 0 {
		t.Fatalf("the 2016 peer saw: %v", v)
	}
}

// TestTransferPolicy: the policy decides which objects may be taken.
func TestTransferPolicy(t *testing.T) {
	tests := []struct {
		policy ownership.Policy
		props  map[string]any
		ok     bool
	}{
		{ownership.TransferMarked, map[string]any{"transferable": true}, true},
		{ownership.TransferMarked, map[string]any{}, false},
		{ownership.TransferAll, map[string]any{}, true},
		{ownership.TransferAll, map[string]any{"transferable": false}, false},
		{ownership.TransferNone, map[string]any{"transferable": true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String()+"/"+strings.Trim(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(
			strings.TrimSpace(strings.Join(keys(tt.props), ",")), " ", ""), "{", ""), "}", ""), ","), func(t *testing.T) {
			_, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond, Transfers: tt.policy})
			a, b := dialClient(t, url, "a"), dialClient(t, url, "b")
			id, _ := a.Create(tt.props)
			waitFor(t, "b sees it", 5*time.Second, func() bool { _, ok := b.World().Get(id); return ok })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.TakeOwnership(ctx, id); (err == nil) != tt.ok {
				t.Fatalf("take: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k, v := range m {
		if v == false {
			k = "not-" + k
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return []string{"unmarked"}
	}
	return out
}

// TestPersistentObject: a persistent object outlives its owner's
// departure, falls to the server, and another client takes it.
func TestPersistentObject(t *testing.T) {
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond, ReclaimGrace: -1})
	alice, bob := dialClient(t, url, "alice"), dialClient(t, url, "bob")
	door, _ := alice.Create(map[string]any{"kind": "door", "persistent": true, "open": true})
	toy, _ := alice.Create(map[string]any{"kind": "toy"})
	waitFor(t, "bob sees the door", 5*time.Second, func() bool { _, ok := bob.World().Get(door); return ok })
	alice.Close()
	ownerIs(t, door, srv.Identifier(), srv.World(), bob.World())
	waitFor(t, "the toy goes with alice", 5*time.Second, func() bool { _, ok := bob.World().Get(toy); return !ok })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bob.TakeOwnership(ctx, door); err != nil {
		t.Fatal(err)
	}
	if err := bob.Set(door, map[string]any{"open": false}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bob closes the door", 5*time.Second, func() bool {
		o, _ := srv.World().Get(door)
		return o.Owner == bob.Identifier() && string(o.Properties.Value("open")) == "false"
	})
}

// TestTransferThroughProxy: a client behind a proxy takes an object owned
// by a client of the server, and the other way round.
func TestTransferThroughProxy(t *testing.T) {
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	proxy, purl := startProxy(t, url, relay.Options{Tick: 2 * time.Millisecond})
	near, far := dialClient(t, url, "near"), dialClient(t, purl, "far")
	ball, _ := near.Create(map[string]any{"transferable": true})
	waitFor(t, "far sees the ball", 5*time.Second, func() bool { _, ok := far.World().Get(ball); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := far.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	ownerIs(t, ball, far.Identifier(), srv.World(), proxy.World(), near.World(), far.World())
	if err := far.Set(ball, map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "far's write reaches near", 5*time.Second, func() bool {
		o, _ := near.World().Get(ball)
		return string(o.Properties.Value("x")) == "1"
	})
	if err := near.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	ownerIs(t, ball, near.Identifier(), srv.World(), proxy.World(), near.World(), far.World())
}

// TestConcurrentTransfersAcrossMesh: two clients on different mesh nodes
// ask for one object at once; every node and client ends with the same
// owner, the one whose claim wins (gameworld.Beats).
func TestConcurrentTransfersAcrossMesh(t *testing.T) {
	nodes := startMesh(t, 3, cluster.Options{})
	owner := dialClient(t, nodes[0].url, "owner")
	b, c := dialClient(t, nodes[1].url, "bee"), dialClient(t, nodes[2].url, "cee")
	worlds := []*gameworld.World{nodes[0].node.World(), nodes[1].node.World(), nodes[2].node.World(), owner.World(), b.World(), c.World()}
	for round := range 5 {
		ball, _ := owner.Create(map[string]any{"transferable": true, "round": round})
		waitFor(t, "everyone sees the ball", 5*time.Second, func() bool {
			for _, w := range worlds {
				if _, ok := w.Get(ball); !ok {
					return false
				}
			}
			return true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, cl := range []*client.Client{b, c} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = cl.TakeOwnership(ctx, ball) }()
		}
		wg.Wait()
		cancel()
		// Both asked at once: each node granted epoch 1, and the greater
		// identifier wins everywhere. (Had one request reached its node
		// after the other's grant, it would have taken epoch 2 and won
		// plainly; either way all agree.)
		var final gameworld.Object
		waitFor(t, "one owner and epoch everywhere", 5*time.Second, func() bool {
			final, _ = worlds[0].Get(ball)
			for _, w := range worlds[1:] {
				if o, _ := w.Get(ball); o.Owner != final.Owner || o.Epoch != final.Epoch {
					return false
				}
			}
			return true
		})
		switch {
		case final.Epoch == 1 && final.Owner != max(b.Identifier(), c.Identifier()):
			t.Fatalf("round %d: %s won at epoch 1 over the greater identifier", round, final.Owner)
		case final.Epoch == 2 && final.Owner != b.Identifier() && final.Owner != c.Identifier(),
			final.Epoch < 1 || final.Epoch > 2:
			t.Fatalf("round %d: owner %s at epoch %d", round, final.Owner, final.Epoch)
		}
		winner := 0
		if final.Owner == c.Identifier() {
			winner = 1
		}
		if errs[winner] != nil {
			t.Fatalf("round %d: the winner was told %v", round, errs[winner])
		}
	}
}

// TestTransfersAcrossFlappingMesh: while the link between two mesh nodes
// keeps being cut (transfers made meanwhile reach the other side only in
// the refresh after the re-dial, as adds carrying their epoch), clients on
// both sides take one object back and forth; once the link stays up every
// node and client agrees on one owner and epoch.
func TestTransfersAcrossFlappingMesh(t *testing.T) {
	nodes := startMesh(t, 2, cluster.Options{})
	a, b := nodes[0], nodes[1]
	owner := dialClient(t, a.url, "owner")
	ca, cb := dialClient(t, a.url, "on-a"), dialClient(t, b.url, "on-b")
	ball, _ := owner.Create(map[string]any{"transferable": true})
	worlds := []*gameworld.World{a.node.World(), b.node.World(), owner.World(), ca.World(), cb.World()}
	waitFor(t, "everyone sees the ball", 5*time.Second, func() bool {
		for _, w := range worlds {
			if _, ok := w.Get(ball); !ok {
				return false
			}
		}
		return true
	})
	cut := func() {
		a.node.CloseLinks(ownership.Mesh, "", websocketGoingAway, "cut for test")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(7 * time.Millisecond):
				cut()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 10 {
		cl := []*client.Client{ca, cb}[i%2]
		cl.TakeOwnership(ctx, ball) // granted or refused: both are fine here
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	waitFor(t, "the mesh back", 5*time.Second, func() bool { return meshLinks(a.node) == 1 && meshLinks(b.node) == 1 })
	waitFor(t, "one owner everywhere", 10*time.Second, func() bool {
		o0, _ := worlds[0].Get(ball)
		for _, w := range worlds[1:] {
			if o, _ := w.Get(ball); o.Owner != o0.Owner || o.Epoch != o0.Epoch {
				return false
			}
		}
		return true
	})
	o, _ := a.node.World().Get(ball)
	t.Logf("owner %s at epoch %d", o.Owner, o.Epoch)
}

// TestTransferWithInterest: a client that sees a region takes an object in
// it; a client looking elsewhere is told nothing of the object or its
// transfer; the old owner's writes are refused as everywhere.
func TestTransferWithInterest(t *testing.T) {
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	owner := dialClient(t, url, "owner")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialAt := func(prefix string, box peer.Box) *client.Client {
		c, err := client.Dial(ctx, url, client.Options{Prefix: prefix, Tick: 2 * time.Millisecond, Interest: []peer.Box{box}, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	near := dialAt("near", peer.Box{Min: [3]float64{-10, -10, -10}, Max: [3]float64{10, 10, 10}})
	far := dialAt("far", peer.Box{Min: [3]float64{100, 100, 100}, Max: [3]float64{110, 110, 110}})
	ball, _ := owner.Create(map[string]any{"transferable": true, "position": []float64{1, 1, 1}})
	waitFor(t, "near sees the ball", 5*time.Second, func() bool { _, ok := near.World().Get(ball); return ok })
	if err := near.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	ownerIs(t, ball, near.Identifier(), srv.World(), owner.World(), near.World())
	if err := near.Set(ball, map[string]any{"position": []float64{2, 2, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Set(ball, map[string]any{"position": []float64{3, 3, 3}}); err == nil {
		t.Fatal("the old owner moved the ball")
	}
	waitFor(t, "the owner sees near's move", 5*time.Second, func() bool {
		o, _ := owner.World().Get(ball)
		return string(o.Properties.Value("position")) == "[2,2,2]"
	})
	if _, ok := far.World().Get(ball); ok {
		t.Fatal("the far client was told of the ball")
	}
}

// TestTransferUnderLegacyServer: a proxy under a 2016 server grants
// transfers only of objects owned behind it (the server sees a remove and,
// later, an add, and never crashes), and refuses those of objects owned
// above it, which the server would not let it hand over.
func TestTransferUnderLegacyServer(t *testing.T) {
	legacy := wiretest.NewLegacyServer("server-LEGACY00-LEGACY00")
	mux := http.NewServeMux()
	mux.Handle("/ws", legacy)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, urlP := startProxy(t, wiretest.WSURL(srv), relay.Options{Tick: 2 * time.Millisecond})
	waitFor(t, "proxy upstream", 5*time.Second, func() bool { return upstreamConnected(p) })
	direct := wiretest.Dial(t, wiretest.WSURL(srv), "client-DIRECT00-DIRECT00", wiretest.Options{})
	direct.Change(wiretest.Add("above", "client-DIRECT00-DIRECT00", map[string]any{"transferable": true}))
	a, b := dialClient(t, urlP, "a"), dialClient(t, urlP, "b")
	below, _ := a.Create(map[string]any{"transferable": true})
	waitFor(t, "b sees both", 5*time.Second, func() bool {
		_, ok1 := b.World().Get("above")
		_, ok2 := b.World().Get(below)
		return ok1 && ok2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.TakeOwnership(ctx, "above"); !errors.Is(err, relay.ErrTransferRefused) {
		t.Fatalf("take an object owned above a 2016 server: %v", err)
	}
	if err := b.TakeOwnership(ctx, below); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the 2016 server and its client see b own it", 5*time.Second, func() bool {
		return legacy.Objects()[below].Owner == b.Identifier() && direct.Objects()[below].Owner == b.Identifier()
	})
	if c := legacy.Crashes(); len(c) > 0 {
		t.Fatalf("the 2016 server crashed: %v", c)
	}
	if v := direct.Violations(); len(v) > 0 {
		t.Fatalf("the 2016 client saw: %v", v)
	}
}
