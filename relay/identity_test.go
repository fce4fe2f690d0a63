package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestIdentityCannotBeStolen: a claim to a live client's identifier
// without its resume token is refused with 4004 and the holder keeps
// working; our client, reconnecting with its token, takes over at once;
// a 2016-style peer, which has no tokens, reclaims once the old
// connection is gone and the grace period has passed.
func TestIdentityCannotBeStolen(t *testing.T) {
	_, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond, ReclaimGrace: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder, err := client.Dial(ctx, url, client.Options{Identifier: c1ID, Tick: 5 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	gem, _ := holder.Create(map[string]any{"n": 1})
	watcher := wiretest.Dial(t, url, c0ID, wiretest.Options{})
	watcher.WaitProp(gem, "n", "1")

	t.Run("a thief without the token is refused", func(t *testing.T) {
		thief := wiretest.Dial(t, url, c1ID, wiretest.Options{})
		code, _ := thief.WaitClosed(5 * time.Second)
		if code != websocket.StatusCode(4004) {
			t.Fatalf("the thief was closed with %d, want 4004", code)
		}
		holder.Set(gem, map[string]any{"n": 2})
		watcher.WaitProp(gem, "n", "2")
		if !holder.Connected() {
			t.Fatal("the holder was disturbed")
		}
	})

	t.Run("a thief behind a proxy is refused alone", func(t *testing.T) {
		// The proxy's upstream link stays up: a world another connection
		// holds upstream is refused alone (metadata "taken"), and the
		// proxy closes the link that claims it with 4004.
		p, urlP := startProxy(t, url, relay.Options{})
		sibling := wiretest.Dial(t, urlP, c3ID, wiretest.Options{})
		sibling.Change(wiretest.Add("sibling", c3ID, map[string]any{"n": 1}))
		watcher.WaitProp("sibling", "n", "1")
		thief := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})
		thief.TryChange(wiretest.Update(gem, c1ID, map[string]any{"n": 99})) //nolint:errcheck // it may be closed already
		code, reason := thief.WaitClosed(5 * time.Second)
		if code != websocket.StatusCode(4004) {
			t.Fatalf("the thief behind the proxy was closed with %d %q, want 4004", code, reason)
		}
		sibling.Change(wiretest.Update("sibling", c3ID, map[string]any{"n": 2}))
		watcher.WaitProp("sibling", "n", "2")
		if !upstreamConnected(p) {
			t.Fatal("the proxy lost its upstream link")
		}
		if n := removesOf(watcher, "sibling"); n != 0 {
			t.Fatalf("the sibling's object was removed %d times for the server's clients", n)
		}
		holder.Set(gem, map[string]any{"n": 4})
		watcher.WaitProp(gem, "n", "4")
		if !holder.Connected() {
			t.Fatal("the holder was disturbed")
		}
		sibling.Close()
		watcher.WaitGone("sibling")
	})

	t.Run("our client reconnects with its token", func(t *testing.T) {
		// An abnormal close: the server keeps the claim through the grace.
		holder.Node().CloseLinks(ownership.Upstream, "", 4999, "cut")
		waitFor(t, "the reconnect", 5*time.Second, func() bool { return holder.Connected() })
		holder.Set(gem, map[string]any{"n": 5})
		watcher.WaitProp(gem, "n", "5")
		if n := removesOf(watcher, gem); n != 0 {
			t.Fatalf("the watcher saw the object removed %d times", n)
		}
	})

	t.Run("a 2016 peer reclaims after the grace period", func(t *testing.T) {
		old := wiretest.Dial(t, url, c2ID, wiretest.Options{})
		old.Change(wiretest.Add("bell", c2ID, map[string]any{}))
		watcher.WaitHas("bell")
		old.Drop()
		again := wiretest.Dial(t, url, c2ID, wiretest.Options{})
		if code, _ := again.WaitClosed(5 * time.Second); code != websocket.StatusCode(4004) {
			t.Fatalf("a reclaim within the grace period was closed with %d, want 4004", code)
		}
		watcher.WaitGone("bell")
		later := wiretest.Dial(t, url, c2ID, wiretest.Options{})
		later.Change(wiretest.Add("bell", c2ID, map[string]any{"v": 2}))
		watcher.WaitProp("bell", "v", "2")
	})
}
