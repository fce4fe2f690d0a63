package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
)

// testLogger logs to stderr at debug level when SOLIPSISM_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("SOLIPSISM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// startNode starts a node behind a real HTTP server on 127.0.0.1 and
// returns it with its ws:// URL.
func startNode(t testing.TB, opts relay.Options) (*relay.Node, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	if opts.DigestInterval == 0 {
		// Every test is an anti-entropy check too: links compare digests
		// often, and a healthy run repairs nothing.
		opts.DigestInterval = testDigestInterval
	}
	n, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r := n.Repairs(); !repairsAllowed[n] && r[relay.RepairMissing]+r[relay.RepairStale]+r[relay.RepairExtra] > 0 {
			t.Errorf("node %s repaired divergences in a run without faults: %v", n.Identifier(), r)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("closing node: %v", err)
		}
		srv.Close()
	})
	return n, wiretest.WSURL(srv)
}

// testDigestInterval is the DigestInterval of test nodes.
const testDigestInterval = 150 * time.Millisecond

// repairsAllowed lists the nodes of tests that cause divergence on purpose.
var repairsAllowed = map[*relay.Node]bool{}

// waitWorld waits until cond holds for the node's world.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type props = map[string]any

// startProxy starts a proxy node whose upstream is upstreamURL.
func startProxy(t testing.TB, upstreamURL string, opts relay.Options) (*relay.Node, string) {
	t.Helper()
	opts.Role = ownership.Proxy
	n, url := startNode(t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.RunUpstream(ctx, relay.UpstreamOptions{URL: upstreamURL, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return n, url
}

// chainOf returns the identifierChain of the link that claims id, sorted,
// or nil.
func chainOf(n *relay.Node, id string) []string { return n.ChainOf(id) }

func sameSet(got []string, want ...string) bool {
	w := append([]string(nil), want...)
	sort.Strings(w)
	return fmt.Sprint(got) == fmt.Sprint(w)
}

// ids returns the sorted ids of a peer's view.
func ids(m map[string]wiretest.Object) []string {
	var out []string
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// upstreamConnected reports whether n has an open upstream link.
// upstreamLinkID returns the id of n's upstream link, 0 for none.
func upstreamLinkID(n *relay.Node) uint64 {
	for _, l := range n.Links() {
		if l.Kind == "upstream" {
			return l.ID
		}
	}
	return 0
}

func upstreamConnected(n *relay.Node) bool {
	for _, l := range n.Links() {
		if l.Kind == "upstream" {
			return true
		}
	}
	return false
}
