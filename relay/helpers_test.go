package relay

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
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
func startNode(t testing.TB, opts Options) (*Node, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
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
