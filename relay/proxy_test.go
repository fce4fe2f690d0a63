package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

const (
	p1ID = "proxy-11111111-11111111"
	p2ID = "proxy-22222222-22222222"
	c0ID = "client-00000000-00000000" // on the server
	c1ID = "client-11111111-aaaaaaaa" // behind P2
	c2ID = "client-22222222-bbbbbbbb" // behind P2
	c3ID = "client-33333333-cccccccc" // behind P1
)

// Server ← P1 ← P2 ← clients, with clients at every level.
func TestProxyChain(t *testing.T) {
	// A vanished client's objects go after the reclaim grace, shortened here.
	s, urlS := startNode(t, relay.Options{ReclaimGrace: 300 * time.Millisecond})
	p1, url1 := startProxy(t, urlS, relay.Options{Identifier: p1ID, ReclaimGrace: 300 * time.Millisecond})
	p2, url2 := startProxy(t, url1, relay.Options{Identifier: p2ID, ReclaimGrace: 300 * time.Millisecond})
	c0 := wiretest.Dial(t, urlS, c0ID, wiretest.Options{})
	c3 := wiretest.Dial(t, url1, c3ID, wiretest.Options{})
	c1 := wiretest.Dial(t, url2, c1ID, wiretest.Options{})
	c2 := wiretest.Dial(t, url2, c2ID, wiretest.Options{DocDialect: true})
	all := []*wiretest.Peer{c0, c1, c2, c3}

	t.Run("identifierChain propagates", func(t *testing.T) {
		waitFor(t, "P2's chain at P1", 5*time.Second, func() bool { return sameSet(chainOf(p1, p2ID), p2ID, c1ID, c2ID) })
		waitFor(t, "P1's chain at the server", 5*time.Second, func() bool {
			return sameSet(chainOf(s, p1ID), p1ID, c3ID, p2ID, c1ID, c2ID)
		})
	})
	t.Run("every client sees every other client's objects, never its own", func(t *testing.T) {
		for _, c := range all {
			c.Change(wiretest.Add("obj-"+c.ID, c.ID, props{"pos": []int{0, 0, 0}, "name": c.ID}))
		}
		for _, c := range all {
			for _, other := range all {
				if other != c {
					c.WaitHas("obj-" + other.ID)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
		for _, c := range all {
			if _, ok := c.Objects()["obj-"+c.ID]; ok {
				t.Errorf("%s got its own object echoed", c.ID)
			}
			if got := len(c.Objects()); got != 3 {
				t.Errorf("%s sees %d objects, want 3: %v", c.ID, got, ids(c.Objects()))
			}
		}
		if got := s.World().Len(); got != 4 {
			t.Errorf("server holds %d objects, want 4", got)
		}
	})
	t.Run("partial updates in both directions", func(t *testing.T) {
		c1.Change(wiretest.Update("obj-"+c1ID, c1ID, props{"pos": []int{1, 1, 1}}))
		c0.WaitProp("obj-"+c1ID, "pos", "[1,1,1]")
		c3.WaitProp("obj-"+c1ID, "pos", "[1,1,1]")
		c2.WaitProp("obj-"+c1ID, "pos", "[1,1,1]")
		c0.Change(wiretest.Update("obj-"+c0ID, c0ID, props{"pos": []int{2, 2, 2}}))
		c1.WaitProp("obj-"+c0ID, "pos", "[2,2,2]")
		if got := string(c1.Objects()["obj-"+c0ID].Properties["name"]); got != `"`+c0ID+`"` {
			t.Fatalf("untouched property became %s", got)
		}
	})
	t.Run("a client leaving is cleaned up everywhere", func(t *testing.T) {
		c1.Drop()
		for _, c := range []*wiretest.Peer{c0, c2, c3} {
			c.WaitGone("obj-" + c1ID)
		}
		waitFor(t, "c1 leaves P1's chain at the server", 5*time.Second, func() bool {
			return sameSet(chainOf(s, p1ID), p1ID, c3ID, p2ID, c2ID)
		})
	})
	t.Run("a whole proxy leaving is cleaned up everywhere", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p2.Close(ctx)
		for _, c := range []*wiretest.Peer{c0, c3} {
			c.WaitGone("obj-" + c2ID)
		}
		waitFor(t, "P2 leaves the chain at the server", 5*time.Second, func() bool {
			return sameSet(chainOf(s, p1ID), p1ID, c3ID)
		})
		if got := s.World().Len(); got != 2 {
			t.Errorf("server holds %d objects, want 2", got)
		}
	})
	for _, c := range all {
		c.CheckClean()
	}
}

// A client behind a proxy cannot write another world's object through it,
// and a peer cannot write a proxy's clients' objects at the server.
func TestProxyForgedWritesRefusedAtEveryHop(t *testing.T) {
	s, urlS := startNode(t, relay.Options{})
	p1, url1 := startProxy(t, urlS, relay.Options{Identifier: p1ID})
	c0 := wiretest.Dial(t, urlS, c0ID, wiretest.Options{})
	c1 := wiretest.Dial(t, url1, c1ID, wiretest.Options{})
	c2 := wiretest.Dial(t, url1, c2ID, wiretest.Options{})
	waitFor(t, "chain", 5*time.Second, func() bool { return sameSet(chainOf(s, p1ID), p1ID, c1ID, c2ID) })
	c0.Change(wiretest.Add("o0", c0ID, props{"hp": 100}))
	c1.Change(wiretest.Add("o1", c1ID, props{"hp": 100}))
	c2.WaitProp("o0", "hp", "100")
	c2.WaitProp("o1", "hp", "100")
	c0.WaitProp("o1", "hp", "100")

	tests := []struct {
		name   string
		via    *wiretest.Peer
		at     *relay.Node
		change map[string]any
	}{
		{"neighbour's object through the proxy", c2, p1, wiretest.Update("o1", c1ID, props{"hp": 0})},
		{"server-side object through the proxy", c2, p1, wiretest.Update("o0", c0ID, props{"hp": 0})},
		{"remove through the proxy", c2, p1, wiretest.Remove("o1", c1ID)},
		{"add claiming a neighbour", c2, p1, wiretest.Add("fake", c1ID, props{})},
		{"proxy's client's object at the server", c0, s, wiretest.Update("o1", c1ID, props{"hp": 0})},
		{"add claiming the proxy at the server", c0, s, wiretest.Add("fake", p1ID, props{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := refusedCount(tt.at)
			tt.via.Change(tt.change)
			waitFor(t, "refusal", 5*time.Second, func() bool { return refusedCount(tt.at) > before })
		})
	}
	// Let anything that slipped through arrive, then check every copy.
	c1.Change(wiretest.Update("o1", c1ID, props{"marker": 1}))
	c0.WaitProp("o1", "marker", "1")
	c2.WaitProp("o1", "marker", "1")
	for _, n := range []*relay.Node{s, p1} {
		for _, id := range []string{"o0", "o1"} {
			if o, ok := n.World().Get(id); !ok || string(o.Properties.Value("hp")) != "100" {
				t.Errorf("%s: %s = %+v, %v", n.Identifier(), id, o, ok)
			}
		}
		if _, ok := n.World().Get("fake"); ok {
			t.Errorf("%s applied a forged add", n.Identifier())
		}
	}
	for _, c := range []*wiretest.Peer{c0, c1, c2} {
		if _, ok := c.Objects()["fake"]; ok {
			t.Errorf("%s received a forged object", c.ID)
		}
		c.CheckClean()
	}
}

// A 2016-style client behind a proxy, and a 2016-style server in front of
// one: nothing that would crash the old library is ever sent.
func TestProxyWithLegacyPeers(t *testing.T) {
	legacy := wiretest.NewLegacyServer("server-LEGACY00-LEGACY00")
	mux := http.NewServeMux()
	mux.Handle("/ws", legacy)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, urlP := startProxy(t, wiretest.WSURL(srv), relay.Options{Identifier: p1ID})

	direct := wiretest.Dial(t, wiretest.WSURL(srv), c0ID, wiretest.Options{}) // on the legacy server
	old := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})                   // 2016 client behind the proxy
	modern := wiretest.Dial(t, urlP, c2ID, wiretest.Options{DocDialect: true})
	waitFor(t, "proxy upstream", 5*time.Second, func() bool { return upstreamConnected(p) })

	direct.Change(wiretest.Add("d", c0ID, props{"v": 1}))
	old.Change(wiretest.Add("o", c1ID, props{"v": 1}))
	modern.Change(wiretest.Add("m", c2ID, props{"v": 1}))
	old.WaitHas("d")
	old.WaitHas("m")
	modern.WaitHas("d")
	modern.WaitHas("o")
	direct.WaitHas("o")
	direct.WaitHas("m")

	// The old client slows the proxy down, as the 2016 library does.
	old.Send("requestLessData", nil)
	waitFor(t, "slower link", 5*time.Second, func() bool {
		for _, l := range p.Links() {
			if l.Identifier == c1ID && l.IntervalMs > 50 {
				return true
			}
		}
		return false
	})
	// Churn that would crash the old library if relayed naively: add and
	// remove within one tick, remove of an object the legacy server never
	// saw, re-create within a tick.
	modern.Change(wiretest.Add("flash", c2ID, props{}), wiretest.Remove("flash", c2ID))
	modern.Change(wiretest.Add("again", c2ID, props{"n": 1}))
	modern.Change(wiretest.Remove("again", c2ID))
	modern.Change(wiretest.Add("again", c2ID, props{"n": 2}))
	direct.Change(wiretest.Update("d", c0ID, props{"v": 2}))
	old.WaitProp("d", "v", "2")
	direct.WaitProp("again", "n", "2")
	old.WaitProp("again", "n", "2")
	old.Change(wiretest.Remove("o", c1ID))
	direct.WaitGone("o")
	modern.Close()
	direct.WaitGone("m")
	direct.WaitGone("again")

	if c := legacy.Crashes(); len(c) > 0 {
		t.Fatalf("the proxy sent the 2016 server what crashes it: %v", c)
	}
	old.CheckClean()
	direct.CheckClean()
}

// A proxy dials its upstream over wss://.
func TestProxyOverWSS(t *testing.T) {
	s, err := relay.New(relay.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", s)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(func() { s.Close(context.Background()); srv.Close() })
	wss := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"

	p, urlP := startNode(t, relay.Options{Role: ownership.Proxy, Identifier: p1ID})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.RunUpstream(ctx, relay.UpstreamOptions{URL: wss, Dial: peer.DialOptions{HTTPClient: srv.Client()}})
	}()
	t.Cleanup(func() { cancel(); <-done })

	c, err := client.Dial(ctx, wss, client.Options{Dial: peer.DialOptions{HTTPClient: srv.Client()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	behind := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})
	c.CreateWithID("tls-obj", map[string]any{"v": 1})
	behind.WaitProp("tls-obj", "v", "1")
	behind.Change(wiretest.Add("plain-obj", c1ID, props{"v": 2}))
	waitFor(t, "object through the wss proxy", 5*time.Second, func() bool { _, ok := c.World().Get("plain-obj"); return ok })
}
