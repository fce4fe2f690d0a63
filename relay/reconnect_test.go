package relay_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// restartable serves a node on a fixed loopback address that can be taken
// down and brought back.
type restartable struct {
	t    testing.TB
	addr string
	srv  *http.Server
}

func (r *restartable) start(n *relay.Node) {
	r.t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ {
		if ln, err = net.Listen("tcp", addr); !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: mux}
	go r.srv.Serve(ln)
}

// stop closes the listener; established WebSocket links are not touched.
func (r *restartable) stop() { r.srv.Close() }

func (r *restartable) url() string { return "ws://" + r.addr + "/ws" }

func viewIs(p *wiretest.Peer, want ...string) func(map[string]wiretest.Object) bool {
	return func(m map[string]wiretest.Object) bool { return sameSet(ids(m), want...) }
}

func TestProxyReconnect(t *testing.T) {
	// The outage is simulated by the server dropping the proxy's link: the
	// proxy's worlds go once the (shortened) reclaim grace is over.
	s, err := relay.New(relay.Options{Logger: testLogger(), ReclaimGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rs := &restartable{t: t}
	rs.start(s)
	p, urlP := startProxy(t, rs.url(), relay.Options{Identifier: p1ID})
	c0 := wiretest.Dial(t, rs.url(), c0ID, wiretest.Options{})
	c1 := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})
	c2 := wiretest.Dial(t, urlP, c2ID, wiretest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := client.Dial(ctx, rs.url(), client.Options{Identifier: "client-GGGGGGGG-GGGGGGGG", MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	c0.Change(wiretest.Add("o0", c0ID, props{"x": 1}), wiretest.Add("o0b", c0ID, props{}))
	c1.Change(wiretest.Add("o1", c1ID, props{"x": 1}))
	c2.Change(wiretest.Add("o2", c2ID, props{}))
	if err := g.CreateWithID("og", map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	c1.Wait("initial view", 5*time.Second, viewIs(c1, "o0", "o0b", "o2", "og"))
	c0.Wait("initial view", 5*time.Second, viewIs(c0, "o1", "o2", "og"))

	t.Run("upstream outage, server keeps its world", func(t *testing.T) {
		rs.stop()
		s.CloseLinkOf(p1ID, peer.StatusGoingAway, "simulated outage")
		waitFor(t, "proxy notices", 5*time.Second, func() bool { return !upstreamConnected(p) })

		// While the proxy is cut off, the world moves on on both sides.
		c0.Change(wiretest.Update("o0", c0ID, props{"x": 2}), wiretest.Remove("o0b", c0ID), wiretest.Add("o0c", c0ID, props{}))
		c1.Change(wiretest.Update("o1", c1ID, props{"x": 5}), wiretest.Add("o1b", c1ID, props{}))
		c2.WaitProp("o1", "x", "5") // the proxy still serves its own clients
		c0.Wait("server cleaned up the proxy's worlds", 5*time.Second, viewIs(c0, "og"))
		// The proxy's clients keep the last known state of the rest: a
		// pause, not a wipe.
		if v := ids(c1.Objects()); !sameSet(v, "o0", "o0b", "o2", "og") {
			t.Fatalf("during the outage c1 sees %v", v)
		}

		rs.start(s)
		c1.Wait("c1 resynchronised", 10*time.Second, viewIs(c1, "o0", "o0c", "o2", "og"))
		c1.WaitProp("o0", "x", "2")
		c2.Wait("c2 resynchronised", 5*time.Second, viewIs(c2, "o0", "o0c", "o1", "o1b", "og"))
		c0.Wait("c0 sees the proxy's clients again", 5*time.Second, viewIs(c0, "o1", "o1b", "o2", "og"))
		c0.WaitProp("o1", "x", "5")
	})

	t.Run("server restarts with an empty world", func(t *testing.T) {
		rs.stop()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		s.Close(cctx)
		c0.WaitClosed(5 * time.Second)
		s2, err := relay.New(relay.Options{Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(context.Background())
		rs.start(s2)
		defer rs.stop()
		// Everything owned behind the proxy, and the Go client's object,
		// come back; the departed c0's objects vanish from the proxy.
		waitFor(t, "owned objects back on the new server", 10*time.Second, func() bool {
			return s2.World().Len() == 4
		})
		for _, id := range []string{"o1", "o1b", "o2", "og"} {
			if _, ok := s2.World().Get(id); !ok {
				t.Errorf("new server lacks %s", id)
			}
		}
		c1.Wait("stale objects swept", 10*time.Second, viewIs(c1, "o2", "og"))
		c2.Wait("stale objects swept", 5*time.Second, viewIs(c2, "o1", "o1b", "og"))
		waitFor(t, "go client sees the proxy's clients", 5*time.Second, func() bool { return g.World().Len() == 4 })
	})
	for _, c := range []*wiretest.Peer{c1, c2} {
		c.CheckClean()
	}
}

// TestClientFailover: a client given two nodes' URLs moves to the second
// when the first closes, and takes its objects along.
func TestClientFailover(t *testing.T) {
	a, urlA := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	b, urlB := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, urlA, client.Options{Prefix: "roamer", FailoverURLs: []string{urlB}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, _ := c.Create(map[string]any{"kind": "roamer"})
	waitFor(t, "the object on the first node", 5*time.Second, func() bool { _, ok := a.World().Get(id); return ok })
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the object on the second node", 10*time.Second, func() bool { _, ok := b.World().Get(id); return ok })
	if !c.Connected() {
		t.Fatal("the client is not connected after failing over")
	}
}

// TestClientCloseSendsLastChanges: a client that changes its persistent
// object and closes at once has its last change reach the node before it
// leaves: the object falls to the node with it.
func TestClientCloseSendsLastChanges(t *testing.T) {
	srv, url := startNode(t, relay.Options{Tick: 20 * time.Millisecond, ReclaimGrace: -1})
	for round := range 5 {
		c := dialClient(t, url, "leaver")
		id, _ := c.Create(map[string]any{"persistent": true, "step": 0})
		// Once the node has the object (and so the client's metadata), its
		// last change must follow it however soon the client closes.
		waitFor(t, "the node has the object", 5*time.Second, func() bool { _, ok := srv.World().Get(id); return ok })
		c.Set(id, map[string]any{"step": round + 1})
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the object falls to the node", 5*time.Second, func() bool {
			o, ok := srv.World().Get(id)
			return ok && o.Owner == srv.Identifier()
		})
		if o, _ := srv.World().Get(id); string(o.Properties.Value("step")) != fmt.Sprint(round+1) {
			t.Fatalf("round %d: the node has step %s, want the last change %d", round, o.Properties.Value("step"), round+1)
		}
	}
}
