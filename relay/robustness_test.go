package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/internal/wiretest"
)

// silentPeer completes the handshake like a client, then never reads again.
func silentPeer(t *testing.T, url, id string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	if _, _, err := c.Read(ctx); err != nil { // requestMetadata
		t.Fatal(err)
	}
	md, _ := json.Marshal([]any{"metadataChange", map[string]any{"identifier": id, "identifierChain": []string{id}}})
	if err := c.Write(ctx, websocket.MessageText, md); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil { // requestRefresh, which follows the metadata
		t.Fatal(err)
	}
	return c
}

func linkCount(n *relay.Node) int { return len(n.Links()) }

// A peer that stops reading only delays itself: the others keep receiving
// at full speed, its queue stays at one entry per object, and it is closed
// after the stall timeout.
func TestSlowPeerDoesNotDisturbOthers(t *testing.T) {
	node, url := startNode(t, relay.Options{Tick: 10 * time.Millisecond, StallTimeout: time.Second})
	writer := wiretest.Dial(t, url, "client-wwwwwwww-wwwwwwww", wiretest.Options{})
	healthy := wiretest.Dial(t, url, "client-hhhhhhhh-hhhhhhhh", wiretest.Options{})
	silentPeer(t, url, "client-ssssssss-ssssssss")
	waitFor(t, "three ready links", 5*time.Second, func() bool { return readyLinks(node) == 3 })

	blob := strings.Repeat("x", 64<<10)
	writer.Change(wiretest.Add("big", writer.ID, props{"blob": blob, "i": 0}))
	healthy.WaitProp("big", "i", "0")
	// Keep the updates coming until the silent peer's socket buffers are
	// full and its link is closed as stalled: how much that takes depends
	// on the kernel's buffer sizes, so the loop is bounded, not fixed.
	maxQueued := 0
	var slowest time.Duration
	const most = 2000 // 128 MiB at most
	i := 1
	for ; i <= most && linkCount(node) == 3; i++ {
		start := time.Now()
		writer.Change(wiretest.Update("big", writer.ID, props{"blob": blob[:len(blob)-i%1000], "i": i}))
		healthy.WaitProp("big", "i", fmt.Sprint(i))
		slowest = max(slowest, time.Since(start))
		for _, l := range node.Links() {
			maxQueued = max(maxQueued, l.Queued)
		}
	}
	if maxQueued > 1 {
		t.Errorf("a link queued %d objects; the world has one", maxQueued)
	}
	// The stalled link is closed; the two others live on.
	waitFor(t, "stalled link closed", 10*time.Second, func() bool { return linkCount(node) == 2 })
	t.Logf("after %d updates of 64 KiB; slowest delivery to the healthy peer meanwhile: %s", i-1, slowest)
	writer.Change(wiretest.Update("big", writer.ID, props{"i": -1}))
	healthy.WaitProp("big", "i", "-1")
}

// Keepalive pings find a peer that went silent even when nothing is sent
// to it.
func TestKeepaliveClosesSilentPeer(t *testing.T) {
	node, url := startNode(t, relay.Options{PingInterval: 50 * time.Millisecond, StallTimeout: 300 * time.Millisecond})
	alive := wiretest.Dial(t, url, "client-aaaaaaaa-aaaaaaaa", wiretest.Options{})
	silentPeer(t, url, "client-ssssssss-ssssssss")
	waitFor(t, "two ready links", 5*time.Second, func() bool { return readyLinks(node) == 2 })
	waitFor(t, "silent peer dropped", 5*time.Second, func() bool { return linkCount(node) == 1 })
	// The peer that answers pings is still there after many ping rounds.
	time.Sleep(300 * time.Millisecond)
	if links := node.Links(); len(links) != 1 || links[0].Identifier != alive.ID {
		t.Fatalf("links = %+v", links)
	}
}

// Browsers from other origins are refused unless allowed.
func TestOriginPatterns(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		origin   string
		ok       bool
	}{
		{"no origin (not a browser)", nil, "", true},
		{"foreign origin refused", nil, "http://evil.example", false},
		{"allowed origin", []string{"good.example"}, "http://good.example", true},
		{"other origin still refused", []string{"good.example"}, "http://evil.example", false},
		{"any origin", []string{"*"}, "http://evil.example", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			_, url := startNode(t, relay.Options{OriginPatterns: tt.patterns, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				c.CloseNow()
				return
			}
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("err = %v, resp = %v; want 403", err, resp)
			}
			// The page's user sees a failed connection; the operator
			// sees why.
			if l := logs.String(); !strings.Contains(l, "foreign origin") || !strings.Contains(l, tt.origin) {
				t.Fatalf("the node did not log the refused origin:\n%s", l)
			}
		})
	}
}
