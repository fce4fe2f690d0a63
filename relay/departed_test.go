package relay_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// upstreamRecordsIn returns how many records n has read from its
// upstream link.
func upstreamRecordsIn(n *relay.Node) (recs uint64) {
	for _, l := range n.Links() {
		if l.Kind == "upstream" {
			recs += l.RecordsIn
		}
	}
	return recs
}

// departedChain is a server with a proxy chain of depth 2 under it, a
// 2016-style watcher on each node, and a leaver on the server holding
// objects (the first persistent).
type departedChain struct {
	s, p1, p2         *relay.Node
	sURL              string
	watchers          []*wiretest.Peer
	leaver            *wiretest.Peer
	objects           int
	recordsAtP1, atP2 uint64
	persistentID      string
}

func newDepartedChain(t *testing.T, objects int) *departedChain {
	t.Helper()
	c := &departedChain{objects: objects, persistentID: "l-00000"}
	var p1URL, p2URL string
	c.s, c.sURL = startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	c.p1, p1URL = startProxy(t, c.sURL, relay.Options{Tick: 5 * time.Millisecond})
	c.p2, p2URL = startProxy(t, p1URL, relay.Options{Tick: 5 * time.Millisecond})
	waitFor(t, "the chain connected", 10*time.Second, func() bool { return upstreamConnected(c.p1) && upstreamConnected(c.p2) })
	for i, u := range []string{c.sURL, p1URL, p2URL} {
		c.watchers = append(c.watchers, wiretest.Dial(t, u, fmt.Sprintf("watch-%08d-WWWWWWWW", i), wiretest.Options{}))
	}
	c.leaver = wiretest.Dial(t, c.sURL, "leaver-LLLLLLLL-LLLLLLLL", wiretest.Options{})
	recs := make([]map[string]any, objects)
	for i := range recs {
		pr := map[string]any{"i": i}
		if i == 0 {
			pr[relay.PropPersistent] = true
		}
		recs[i] = wiretest.Add(fmt.Sprintf("l-%05d", i), c.leaver.ID, pr)
	}
	c.leaver.Change(recs...)
	for _, w := range c.watchers {
		w.Wait("every watcher holds the leaver's objects", 30*time.Second, func(objs map[string]wiretest.Object) bool { return len(objs) == objects })
	}
	c.recordsAtP1, c.atP2 = upstreamRecordsIn(c.p1), upstreamRecordsIn(c.p2)
	return c
}

// converged waits until every node and watcher holds the server's world:
// every object, with its owner and properties.
func (c *departedChain) converged(t *testing.T, what string) {
	t.Helper()
	for i, n := range []*relay.Node{c.p1, c.p2} {
		var diff string
		if !await(30*time.Second, func() bool { diff = worldDiff(n.World(), c.s.World()); return diff == "" }) {
			t.Fatalf("%s: proxy %d: %s", what, i+1, diff)
		}
	}
	want := map[string]gameworld.Object{}
	c.s.World().Range(func(o gameworld.Object) bool { want[o.ID] = o; return true })
	for i, w := range c.watchers {
		w.Wait(fmt.Sprintf("%s: watcher %d holds the server's world", what, i), 30*time.Second, func(objs map[string]wiretest.Object) bool {
			if len(objs) != len(want) {
				return false
			}
			for id, o := range objs {
				ref, ok := want[id]
				if !ok || ref.Owner != o.Owner || ref.Properties.Len() != len(o.Properties) {
					return false
				}
				for k, v := range ref.Properties.All() {
					if !bytes.Equal(o.Properties[k], v) {
						return false
					}
				}
			}
			return true
		})
		w.CheckClean()
	}
}

// TestDepartedDownTheChain: a world that leaves the server with more
// objects than a node removes at once is told to the proxies below as
// one departed message each, not as its removes: each proxy removes the
// objects itself (its 2016 clients get the removes), the persistent one
// goes to the server at every node, and every node and client ends with
// the server's world.
func TestDepartedDownTheChain(t *testing.T) {
	const objects = 4 * relay.DepartSlice
	stop := wiretest.BusyCores()
	defer stop()
	c := newDepartedChain(t, objects)
	c.leaver.Close()
	waitFor(t, "the departure at the server", 30*time.Second, func() bool {
		return c.s.World().Len() == 1 && c.s.World().CountOf([]string{c.s.Identifier()}) == 1
	})
	c.converged(t, "after the departure")
	if o, ok := c.p2.World().Get(c.persistentID); !ok || o.Owner != c.s.Identifier() {
		t.Errorf("the persistent object at the end of the chain: %+v, want the server's", o)
	}
	// What crossed each hop: the persistent object's transfer, not the
	// removes.
	for i, got := range []uint64{upstreamRecordsIn(c.p1) - c.recordsAtP1, upstreamRecordsIn(c.p2) - c.atP2} {
		if got > 10 {
			t.Errorf("proxy %d read %d records from its upstream for the departure of %d objects, want the departed message alone", i+1, got, objects)
		}
	}
}

// TestDepartedWorldComesBack: the leaver connects again to the server
// under its identifier and adds objects (some under its old ids) while
// the proxies are still removing its old ones: each proxy finishes its
// departure at once on the first record of the returning world, and
// keeps exactly what the world sent since.
func TestDepartedWorldComesBack(t *testing.T) {
	const objects = 6 * relay.DepartSlice
	stop := wiretest.BusyCores()
	defer stop()
	c := newDepartedChain(t, objects)
	var once sync.Once
	returned := make(chan *wiretest.Peer, 1)
	c.p2.SetYieldHook(func() {
		// The end of the chain let its lock go mid-departure: the world
		// comes back now, and its objects reach this node before the
		// departure goes on.
		once.Do(func() {
			back, err := wiretest.TryDial(t, c.sURL, c.leaver.ID, wiretest.Options{})
			if err != nil {
				t.Error(err)
				close(returned)
				return
			}
			back.Change(
				wiretest.Add("l-00001", back.ID, map[string]any{"again": 1}),
				wiretest.Add("l-00002", back.ID, map[string]any{"again": 2}),
				wiretest.Add("new-000", back.ID, map[string]any{"again": 3}),
			)
			if !await(10*time.Second, func() bool { return c.p2.World().CountOf([]string{back.ID}) == 3 }) {
				t.Errorf("the returning world owns %d objects at the end of the chain, want its 3", c.p2.World().CountOf([]string{back.ID}))
			}
			returned <- back
		})
	})
	c.leaver.Close()
	var back *wiretest.Peer
	select {
	case back = <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the end of the chain never paused its departure")
	}
	if back == nil {
		t.FailNow()
	}
	time.Sleep(100 * time.Millisecond) // what the departures would still do
	c.converged(t, "after the world came back")
	for _, n := range []*relay.Node{c.s, c.p1, c.p2} {
		if got := n.World().CountOf([]string{back.ID}); got != 3 {
			t.Errorf("node %s holds %d objects of the returning world, want 3", n.Identifier(), got)
		}
	}
	if o, _ := c.p2.World().Get("l-00001"); string(o.Properties.Value("again")) != "1" {
		t.Errorf("l-00001 at the end of the chain: %+v, want what the returning world sent", o)
	}
}

// TestDepartedOnlyFromUpstream: a departed message is the upstream's to
// send. From a client it changes nothing; a malformed one closes the
// client's link with 1007.
func TestDepartedOnlyFromUpstream(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	owner := wiretest.Dial(t, url, "owner-OOOOOOOO-OOOOOOOO", wiretest.Options{})
	owner.Change(wiretest.Add("kept", owner.ID, map[string]any{"n": 1}))
	waitFor(t, "the node holds the object", 10*time.Second, func() bool { _, ok := n.World().Get("kept"); return ok })
	rogue := wiretest.Dial(t, url, "rogue-RRRRRRRR-RRRRRRRR", wiretest.Options{})
	if err := rogue.SendRaw([]byte(`["departed",{"worlds":["owner-OOOOOOOO-OOOOOOOO"],"heir":"rogue-RRRRRRRR-RRRRRRRR"}]`)); err != nil {
		t.Fatal(err)
	}
	rogue.Change(wiretest.Add("after", rogue.ID, map[string]any{"n": 2}))
	waitFor(t, "the rogue's next change applied", 10*time.Second, func() bool { _, ok := n.World().Get("after"); return ok })
	if o, ok := n.World().Get("kept"); !ok || o.Owner != owner.ID {
		t.Fatalf("a client's departed message changed the world: %+v %v", o, ok)
	}
	for _, bad := range []string{
		`["departed",{"worlds":[],"heir":"s"}]`,
		`["departed",{"worlds":["a","a"],"heir":"s"}]`,
		`["departed",{"worlds":["a"]}]`,
		`["departed",{"worlds":"a","heir":"s"}]`,
	} {
		c := wiretest.Dial(t, url, "bad-BBBBBBBB-BBBBBBBB", wiretest.Options{})
		if err := c.SendRaw([]byte(bad)); err != nil {
			t.Fatal(err)
		}
		if code, _ := c.WaitClosed(10 * time.Second); code != websocket.StatusInvalidFramePayloadData {
			t.Errorf("%s: closed with %v, want 1007", bad, code)
		}
	}
	if o, ok := n.World().Get("kept"); !ok || o.Owner != owner.ID {
		t.Fatalf("the world changed: %+v %v", o, ok)
	}
}
