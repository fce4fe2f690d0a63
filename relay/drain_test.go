package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// TestDrainMovesClients: a mesh of two; on member A a Go client that owns
// an object, and a 2016 client (which takes no messages). A drains: it
// says so in its readiness and refuses new handshakes (503); the Go client
// is sent to B and reconnects there at once, its object never vanishing
// for a watcher on B, and writes on; the 2016 client, which cannot be
// told, is closed with 1012 at once. Drain returns when both are gone,
// long before its grace.
func TestDrainMovesClients(t *testing.T) {
	nodes := startMesh(t, 2, cluster.Options{})
	a, b := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, a.url, client.Options{Prefix: "mover", Tick: 5 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	id, err := c.Create(map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	legacy := wiretest.Dial(t, a.url, "legacy-AAAAAAAA-AAAAAAAA", wiretest.Options{})
	watcher := wiretest.Dial(t, b.url, "watch-AAAAAAAA-AAAAAAAA", wiretest.Options{})
	watcher.WaitHas(id)
	stopWatch := wiretest.WatchGone([]string{id}, func(id string) bool { _, ok := watcher.Objects()[id]; return ok })

	drained := make(chan error, 1)
	go func() { drained <- a.node.Drain(ctx, relay.DrainOptions{Grace: time.Minute}) }()
	waitFor(t, "A draining", 5*time.Second, func() bool {
		_, reasons := a.node.Readiness()
		return len(reasons) == 1 && reasons[0] == "draining"
	})
	if _, err := peer.Dial(ctx, a.url, peer.DialOptions{}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a handshake with a draining node: %v, want a 503", err)
	}
	// The Go client is at B long before the grace ends (its own backoff
	// is 1 s: it went at once).
	waitFor(t, "the Go client at B", 2*time.Second, func() bool { return chainOf(b.node, c.Identifier()) != nil })
	if err := c.Set(id, map[string]any{"n": 2}); err != nil {
		t.Fatal(err)
	}
	watcher.WaitProp(id, "n", "2")
	if code, _ := legacy.WaitClosed(10 * time.Second); code != websocket.StatusCode(peer.StatusServiceRestart) {
		t.Errorf("the 2016 client was closed with %d, want 1012", code)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Errorf("Drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain still waits, with no client left")
	}
	if gone := stopWatch(); len(gone) > 0 {
		t.Errorf("the Go client's object vanished for the watcher on B while it moved: %v", gone)
	}
	if !strings.Contains(a.logs.String(), "drained: every client left") {
		t.Errorf("A's log does not say its clients left:\n%s", a.logs)
	}
}

// TestLeftMemberHandsOver: a mesh of three; member A owns two objects
// itself (one persistent, one plain, as a released ball is). A leaves the
// mesh on purpose (its stop): B and C give both to the same member, the
// lowest identifier of the two, at the next epoch, and keep them past the
// reclaim grace. Watchers that speak "ownership" on B and C never see them
// vanish; a 2016 watcher sees each owner change as the protocol says it
// must (a remove naming A, then, in a later message, an add naming the
// heir) and nothing more.
func TestLeftMemberHandsOver(t *testing.T) {
	nodes := startMeshWith(t, 3, cluster.Options{}, relay.Options{ReclaimGrace: 500 * time.Millisecond})
	a, b, c := nodes[0], nodes[1], nodes[2]
	if _, err := a.node.Apply([]gameworld.Change{
		{Type: gameworld.Add, ID: "kept", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"persistent": json.RawMessage("true")})},
		{Type: gameworld.Add, ID: "ball", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"transferable": json.RawMessage("true")})},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var watchers []*client.Client
	var legacy []*wiretest.Peer
	for i, mn := range []*meshNode{b, c} {
		w, err := client.Dial(ctx, mn.url, client.Options{Prefix: "watch"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		l := wiretest.Dial(t, mn.url, fmt.Sprintf("legacy-AAAAAAA%d-AAAAAAAA", i), wiretest.Options{})
		l.WaitHas("kept")
		l.WaitHas("ball")
		waitFor(t, "the watcher has A's objects", 5*time.Second, func() bool {
			_, k := w.World().Get("kept")
			_, b := w.World().Get("ball")
			return k && b
		})
		watchers, legacy = append(watchers, w), append(legacy, l)
	}
	stopWatch := wiretest.WatchGone([]string{"kept", "ball"}, func(id string) bool {
		for _, w := range watchers {
			if _, ok := w.World().Get(id); !ok {
				return false
			}
		}
		return true
	})
	heir := min(b.node.Identifier(), c.node.Identifier())
	a.mesh.Close()
	a.node.Close(ctx)
	for _, mn := range []*meshNode{b, c} {
		waitFor(t, mn.node.Identifier()+" gives A's objects to the heir", 10*time.Second, func() bool {
			for _, id := range []string{"kept", "ball"} {
				if o, ok := mn.node.World().Get(id); !ok || o.Owner != heir {
					return false
				}
			}
			return true
		})
	}
	time.Sleep(time.Second) // past the reclaim grace
	for _, id := range []string{"kept", "ball"} {
		ob, okB := b.node.World().Get(id)
		oc, okC := c.node.World().Get(id)
		if !okB || !okC || ob.Owner != heir || oc.Owner != heir || ob.Epoch != oc.Epoch {
			t.Errorf("%s after the grace: at B %v %s epoch %d, at C %v %s epoch %d", id, okB, ob.Owner, ob.Epoch, okC, oc.Owner, oc.Epoch)
		}
	}
	if gone := stopWatch(); len(gone) > 0 {
		t.Errorf("A's objects vanished for a watcher while A left: %v", gone)
	}
	for i, l := range legacy {
		for _, id := range []string{"kept", "ball"} {
			if o, ok := l.Objects()[id]; !ok || o.Owner != heir || l.Removes()[id] != 1 {
				t.Errorf("2016 watcher %d: %s held %v owned by %q after %d removes; want it owned by the heir after one", i, id, ok, o.Owner, l.Removes()[id])
			}
		}
		if v := l.Violations(); len(v) > 0 {
			t.Errorf("2016 watcher %d was sent what would crash it: %v", i, v)
		}
	}
}
