package relay_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// readyLinks counts links whose metadata the node knows.
func readyLinks(n *relay.Node) int { return n.ReadyLinks() }

func TestServerThreeClients(t *testing.T) {
	// A vanished client's objects go after the reclaim grace, shortened here.
	node, url := startNode(t, relay.Options{ReclaimGrace: 300 * time.Millisecond})
	a := wiretest.Dial(t, url, "client-aaaaaaaa-aaaaaaaa", wiretest.Options{})
	b := wiretest.Dial(t, url, "client-bbbbbbbb-bbbbbbbb", wiretest.Options{DocDialect: true})
	c := wiretest.Dial(t, url, "client-cccccccc-cccccccc", wiretest.Options{})
	waitFor(t, "three ready links", 5*time.Second, func() bool { return readyLinks(node) == 3 })

	t.Run("relay", func(t *testing.T) {
		a.Change(wiretest.Add("obj-a", a.ID, props{"position": []int{1, 2, 3}, "color": "red"}))
		b.WaitProp("obj-a", "position", "[1,2,3]")
		c.WaitProp("obj-a", "color", `"red"`)
		if got := b.Objects()["obj-a"].Owner; got != a.ID {
			t.Fatalf("owner = %q, want %q", got, a.ID)
		}
	})
	t.Run("partial update", func(t *testing.T) {
		a.Change(wiretest.Update("obj-a", a.ID, props{"position": []int{4, 5, 6}}))
		c.WaitProp("obj-a", "position", "[4,5,6]")
		if got := string(c.Objects()["obj-a"].Properties["color"]); got != `"red"` {
			t.Fatalf("untouched property changed to %s", got)
		}
	})
	t.Run("no echo", func(t *testing.T) {
		b.Change(wiretest.Add("obj-b", b.ID, props{"n": 1}))
		a.WaitProp("obj-b", "n", "1")
		c.WaitProp("obj-b", "n", "1")
		time.Sleep(150 * time.Millisecond) // several ticks
		if _, ok := b.Objects()["obj-b"]; ok {
			t.Fatal("server echoed b's own object back to b")
		}
		if _, ok := a.Objects()["obj-a"]; ok {
			t.Fatal("server echoed a's own object back to a")
		}
	})
	t.Run("late joiner gets everything", func(t *testing.T) {
		d := wiretest.Dial(t, url, "client-dddddddd-dddddddd", wiretest.Options{})
		d.WaitProp("obj-a", "position", "[4,5,6]")
		d.WaitProp("obj-a", "color", `"red"`)
		d.WaitProp("obj-b", "n", "1")
		d.CheckClean()
		d.Close()
	})
	t.Run("remove", func(t *testing.T) {
		b.Change(wiretest.Remove("obj-b", b.ID))
		a.WaitGone("obj-b")
		c.WaitGone("obj-b")
		if _, ok := node.World().Get("obj-b"); ok {
			t.Fatal("server still holds removed object")
		}
	})
	t.Run("disconnect cleanup", func(t *testing.T) {
		c.Change(wiretest.Add("obj-c1", c.ID, props{}), wiretest.Add("obj-c2", c.ID, props{}))
		a.WaitHas("obj-c1")
		b.WaitHas("obj-c2")
		c.Drop() // no close handshake: a vanished client, gone after the grace
		a.WaitGone("obj-c1")
		a.WaitGone("obj-c2")
		b.WaitGone("obj-c1")
		b.WaitGone("obj-c2")
		waitFor(t, "node forgets c", 5*time.Second, func() bool { _, ok := node.World().Get("obj-c1"); return !ok })
	})
	for _, p := range []*wiretest.Peer{a, b} {
		p.CheckClean()
	}
	// b spoke the documented dialect: it must have been answered in it.
	if d := dialectOf(node, b.ID); d != "metadata" {
		t.Errorf("dialect for b = %q, want metadata", d)
	}
	if d := dialectOf(node, a.ID); d != "metadataChange" {
		t.Errorf("dialect for a = %q, want metadataChange", d)
	}
}

func dialectOf(n *relay.Node, id string) string {
	if d := n.DialectOf(id); d != "" {
		return d
	}
	return ""
}

// A proxy-like peer whose identifierChain holds several worlds: all their
// objects are accepted, none is echoed, and all go when it disconnects.
func TestServerChainCleanup(t *testing.T) {
	node, url := startNode(t, relay.Options{})
	chain := []string{"proxy-pppppppp-pppppppp", "client-11111111-11111111", "client-22222222-22222222"}
	p := wiretest.Dial(t, url, chain[0], wiretest.Options{Chain: chain})
	watcher := wiretest.Dial(t, url, "client-wwwwwwww-wwwwwwww", wiretest.Options{})
	waitFor(t, "ready", 5*time.Second, func() bool { return readyLinks(node) == 2 })

	p.Change(
		wiretest.Add("p-own", chain[0], props{"k": 0}),
		wiretest.Add("c1-obj", chain[1], props{"k": 1}),
		wiretest.Add("c2-obj", chain[2], props{"k": 2}),
	)
	watcher.WaitProp("c2-obj", "k", "2")
	watcher.WaitProp("c1-obj", "k", "1")
	watcher.WaitProp("p-own", "k", "0")
	watcher.Change(wiretest.Add("w-obj", watcher.ID, props{}))
	p.WaitHas("w-obj")
	time.Sleep(150 * time.Millisecond)
	for _, id := range []string{"p-own", "c1-obj", "c2-obj"} {
		if _, ok := p.Objects()[id]; ok {
			t.Errorf("%s echoed back to the proxy that owns it", id)
		}
	}
	// A world leaving the chain takes its objects with it.
	p.Send("metadataChange", map[string]any{"identifier": chain[0], "identifierChain": chain[:2]})
	watcher.WaitGone("c2-obj")
	if _, ok := watcher.Objects()["c1-obj"]; !ok {
		t.Fatal("c1-obj removed although c1 is still in the chain")
	}
	p.Close()
	for _, id := range []string{"p-own", "c1-obj"} {
		watcher.WaitGone(id)
	}
	if n := node.World().Len(); n != 1 {
		t.Fatalf("world has %d objects after cleanup, want 1 (the watcher's)", n)
	}
	watcher.CheckClean()
	p.CheckClean()
}

func TestServerRefusesForgedWrites(t *testing.T) {
	node, url := startNode(t, relay.Options{})
	victim := wiretest.Dial(t, url, "client-vvvvvvvv-vvvvvvvv", wiretest.Options{})
	forger := wiretest.Dial(t, url, "client-ffffffff-ffffffff", wiretest.Options{})
	waitFor(t, "ready", 5*time.Second, func() bool { return readyLinks(node) == 2 })
	victim.Change(wiretest.Add("v-obj", victim.ID, props{"hp": 100}))
	forger.WaitProp("v-obj", "hp", "100")

	tests := []struct {
		name   string
		change map[string]any
	}{
		{"update another's object", wiretest.Update("v-obj", victim.ID, props{"hp": 0})},
		{"update claiming to own it", wiretest.Update("v-obj", forger.ID, props{"hp": 0})},
		{"add over another's object", wiretest.Add("v-obj", forger.ID, props{"hp": 0})},
		{"add claiming a foreign owner", wiretest.Add("fake", victim.ID, props{"hp": 0})},
		{"remove another's object", wiretest.Remove("v-obj", victim.ID)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := refusedCount(node)
			forger.Change(tt.change)
			waitFor(t, "refusal counted", 5*time.Second, func() bool { return refusedCount(node) > before })
			o, ok := node.World().Get("v-obj")
			if !ok || string(o.Properties.Value("hp")) != "100" || o.Owner != victim.ID {
				t.Fatalf("forged write changed the object: %+v %v", o, ok)
			}
			if _, ok := node.World().Get("fake"); ok {
				t.Fatal("forged add was applied")
			}
		})
	}
	// The forger's link stays open and its own writes still work.
	forger.Change(wiretest.Add("f-obj", forger.ID, props{}))
	victim.WaitHas("f-obj")
	if _, ok := victim.Objects()["fake"]; ok {
		t.Fatal("forged object reached the victim")
	}
	victim.CheckClean()
}

func refusedCount(n *relay.Node) uint64 { return n.RefusedCount() }

// TestRefreshFollowsMetadata: requestRefresh is sent only once the peer has
// said who it is, so a peer that is slow to answer requestMetadata (or
// whose objects are ready first) loses nothing.
func TestRefreshFollowsMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts wiretest.Options
	}{
		{"2016 dialect", wiretest.Options{MetadataDelay: 300 * time.Millisecond}},
		{"documented dialect", wiretest.Options{MetadataDelay: 300 * time.Millisecond, DocDialect: true}},
		{"proxy-like chain", wiretest.Options{MetadataDelay: 300 * time.Millisecond, Chain: []string{"proxy-ssssssss-ssssssss", "client-ssssssss-ssssssss"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startNode(t, relay.Options{})
			watcher := wiretest.Dial(t, url, "client-wwwwwwww-wwwwwwww", wiretest.Options{})
			id := "proxy-ssssssss-ssssssss"
			owner := tc.opts.Chain
			if owner == nil {
				id, owner = "client-ssssssss-ssssssss", []string{"client-ssssssss-ssssssss"}
			}
			tc.opts.Owned = []map[string]any{
				wiretest.Add("still-1", owner[len(owner)-1], props{"n": 1}),
				wiretest.Add("still-2", owner[0], props{"n": 2}),
			}
			slow := wiretest.Dial(t, url, id, tc.opts)
			watcher.WaitProp("still-1", "n", "1")
			watcher.WaitProp("still-2", "n", "2")
			if slow.RefreshBeforeMetadata() {
				t.Fatal("node sent requestRefresh before the peer answered requestMetadata")
			}
			slow.CheckClean()
			watcher.CheckClean()
		})
	}
	t.Run("proxy under a slow 2016 server", func(t *testing.T) {
		legacy := wiretest.NewLegacyServer("server-llllllll-llllllll")
		legacy.MetadataDelay = 300 * time.Millisecond
		srv := httptest.NewServer(legacy)
		t.Cleanup(srv.Close)
		proxy, purl := startProxy(t, wiretest.WSURL(srv), relay.Options{})
		c := wiretest.Dial(t, purl, "client-cccccccc-cccccccc", wiretest.Options{})
		c.Change(wiretest.Add("obj-c", c.ID, props{"n": 1}))
		waitFor(t, "the legacy server to hold obj-c", 5*time.Second, func() bool { _, ok := legacy.Objects()["obj-c"]; return ok })
		waitFor(t, "the proxy's upstream link", 5*time.Second, func() bool { return upstreamConnected(proxy) })
		time.Sleep(400 * time.Millisecond) // past the delayed answer
		if n := legacy.EarlyRefreshes(); n > 0 {
			t.Fatalf("proxy sent requestRefresh %d times before the server's metadata answer", n)
		}
		if cr := legacy.Crashes(); len(cr) > 0 {
			t.Fatalf("legacy server would have crashed: %v", cr)
		}
	})
}

// Node.Apply relays property values as they are, so it refuses what is not
// JSON and changes nothing.
func TestApplyRefusesInvalidJSON(t *testing.T) {
	node, _ := startNode(t, relay.Options{})
	_, err := node.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "x", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"a": json.RawMessage(`{"b":`)})}})
	if err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if node.World().Len() != 0 {
		t.Fatal("the world changed")
	}
	props := gameworld.PropertiesOf(map[string]json.RawMessage{"a": json.RawMessage(`{ "b" : [1, 2] }`)})
	if _, err := node.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "y", Properties: props}}); err != nil {
		t.Fatal(err)
	}
	if o, _ := node.World().Get("y"); string(o.Properties.Value("a")) != `{"b":[1,2]}` {
		t.Fatalf("stored %s, want it compacted", o.Properties.Value("a"))
	}
	if string(props.Value("a")) != `{ "b" : [1, 2] }` {
		t.Fatal("the caller's map was modified")
	}
}

// TestReaddedInAnotherSlot: a writer removes two objects and adds one of
// them again in one message, so that the world gives it the other's slot.
// A 2016 peer is sent the remove and, in a later message, the add (never
// both in one message, which would crash it), both when its link keeps
// up and when it is behind and its queue coalesces.
func TestReaddedInAnotherSlot(t *testing.T) {
	for _, tick := range []time.Duration{peer.Immediate, 20 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			srv, url := startNode(t, relay.Options{Tick: tick})
			writer := wiretest.Dial(t, url, "writer-WRITER00-WRITER00", wiretest.Options{})
			legacy := wiretest.Dial(t, url, "legacy-LEGACY00-LEGACY00", wiretest.Options{})
			const w = "writer-WRITER00-WRITER00"
			writer.Change(wiretest.Add("aa", w, props{"n": 1}), wiretest.Add("bb", w, props{"n": 2}))
			legacy.Wait("both objects", 5*time.Second, func(o map[string]wiretest.Object) bool { return len(o) == 2 })
			a, _ := srv.World().Get("aa")
			b, _ := srv.World().Get("bb")
			// Remove the one in the higher slot, then the other, and add
			// the first again: it takes the lower slot.
			hi, lo := "bb", "aa"
			if a.Slot > b.Slot {
				hi, lo = "aa", "bb"
			}
			writer.Change(wiretest.Remove(hi, w), wiretest.Remove(lo, w), wiretest.Add(hi, w, props{"n": 3}))
			legacy.Wait("the re-added object", 5*time.Second, func(o map[string]wiretest.Object) bool {
				_, gone := o[lo]
				return len(o) == 1 && !gone && string(o[hi].Properties["n"]) == "3"
			})
			if o, _ := srv.World().Get(hi); o.Slot == map[string]uint32{"aa": a.Slot, "bb": b.Slot}[hi] {
				t.Fatalf("%s came back in its own slot %d: the test needs another", hi, o.Slot)
			}
			legacy.CheckClean()
		})
	}
}
