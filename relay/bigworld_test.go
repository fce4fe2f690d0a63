package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
)

// ownedWorld returns n add records owned by owner, each with a property of
// size bytes.
func ownedWorld(owner string, n, size int) []map[string]any {
	blob := strings.Repeat("x", size)
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = wiretest.Add(fmt.Sprintf("w%05d-%s", i, owner[len(owner)-8:]), owner, props{"i": i, "blob": blob})
	}
	return out
}

// The 2016 library answers requestRefresh with its whole world in one
// worldChange, however big: the node takes it, by default.
func TestLegacyPeerSendsItsWholeWorldInOneMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects int
		size    int
	}{
		{"10,001 small objects", 10001, 8},
		{"1,200 objects of 1 KB (1.2 MB)", 1200, 1000},
		{"11,000 objects of 1 KB (11 MB)", 11000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, url := startNode(t, relay.Options{})
			watcher := wiretest.Dial(t, url, "client-wwwwwwww-wwwwwwww", wiretest.Options{})
			id := "client-bbbbbbbb-bbbbbbbb"
			big := wiretest.Dial(t, url, id, wiretest.Options{Owned: ownedWorld(id, tc.objects, tc.size)})
			waitFor(t, "the whole world in the node", 60*time.Second, func() bool { return node.World().Len() == tc.objects })
			watcher.Wait("the whole world", 60*time.Second, func(m map[string]wiretest.Object) bool { return len(m) == tc.objects })
			if err := big.Send("requestRefresh", nil); err != nil {
				t.Fatal(err)
			}
			big.Wait("the world back, none of its own", 60*time.Second, func(m map[string]wiretest.Object) bool { return len(m) == 0 })
			watcher.CheckClean()
			big.CheckClean()
		})
	}
}

// A proxy under a 2016 server whose world arrives as one 1.2 MB message
// connects once and stays connected; its clients see that world.
func TestProxyUnderLegacyServerWithBigWorld(t *testing.T) {
	legacy := wiretest.NewLegacyServer("server-LEGACY00-LEGACY00")
	srv := httptest.NewServer(legacy)
	t.Cleanup(srv.Close)
	owner := "client-00000000-legacy00"
	direct := wiretest.Dial(t, wiretest.WSURL(srv), owner, wiretest.Options{})
	direct.Change(ownedWorld(owner, 1200, 1000)...)
	waitFor(t, "the legacy world", 10*time.Second, func() bool { return len(legacy.Objects()) == 1200 })

	proxy, purl := startNode(t, relay.Options{Role: ownership.Proxy})
	var connects atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		proxy.RunUpstream(ctx, relay.UpstreamOptions{URL: wiretest.WSURL(srv), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
			OnConnect: func() { connects.Add(1) }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	c := wiretest.Dial(t, purl, "client-cccccccc-cccccccc", wiretest.Options{})
	c.Wait("the legacy world through the proxy", 30*time.Second, func(m map[string]wiretest.Object) bool { return len(m) == 1200 })
	time.Sleep(2 * time.Second) // room to flap, if it were going to
	if n := connects.Load(); n != 1 {
		t.Fatalf("proxy connected %d times, want once", n)
	}
	if cr := legacy.Crashes(); len(cr) > 0 {
		t.Fatalf("legacy server would have crashed: %v", cr)
	}
	c.CheckClean()
}

// An upstream that accepts and then drops every connection at once does
// not get reconnected to at the first backoff step forever: short-lived
// links count as failures.
func TestUpstreamBacksOffShortLivedLinks(t *testing.T) {
	var accepts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		accepts.Add(1)
		c.Close(websocket.StatusPolicyViolation, "go away")
	}))
	t.Cleanup(srv.Close)
	proxy, _ := startNode(t, relay.Options{Role: ownership.Proxy})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	proxy.RunUpstream(ctx, relay.UpstreamOptions{URL: wiretest.WSURL(srv), MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond})
	// Backing off: 50, 100, 200, 400, 400, 400 ms (with jitter, at least
	// half of each: 25, 50, 100, 200, 200 …) fit about 9 attempts in 2 s
	// and at most 13; starting over at 50 ms (at least 25) after each
	// connection would make 40 or more.
	if n := accepts.Load(); n > 16 {
		t.Fatalf("%d connections in 2 s: the backoff starts over after links that die at once", n)
	}
}
