package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// startNode runs a node behind a real HTTP server on 127.0.0.1: the
// protocol at /ws, the API at /api/.
func startNode(t *testing.T) (*relay.Node, *httptest.Server) {
	t.Helper()
	n, err := relay.New(relay.Options{Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	mux.Handle("/api/state", api.StateHandler(n))
	mux.Handle("/api/messages", api.MessagesHandler(n))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		n.Close(context.Background())
	})
	return n, srv
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMessagesHandler: a backend publishes over HTTP; the message comes
// from the node's world, to a real client.
func TestMessagesHandler(t *testing.T) {
	n, srv := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", client.Options{Prefix: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var notices []peer.AppMessage
	c.SubscribeMessages(func(m peer.AppMessage) {
		if m.Type == "notice" {
			mu.Lock()
			notices = append(notices, m)
			mu.Unlock()
		}
	})
	// Messages are not state: one published before the node knows the
	// client (its metadata, which says it takes messages) is not for it.
	waitFor(t, "the node to know the client", func() bool {
		for _, l := range n.Links() {
			if l.Identifier == c.Identifier() && l.Ready {
				return true
			}
		}
		return false
	})
	for _, tc := range []struct {
		method, body string
		want         int
	}{
		{"POST", `{"type":"notice","data":{"text":"server restarts at noon"}}`, 202},
		{"POST", `{"type":"notice","world":"` + c.Identifier() + `","data":"just you"}`, 202},
		{"POST", `{"data":1}`, 400},
		{"POST", `not json`, 400},
		{"GET", ``, 405},
		{"POST text", `{"type":"notice"}`, 415},
		{"POST", `{"type":"notice","data":"` + strings.Repeat("x", peer.DefaultMaxRecordBytes) + `"}`, 413},
	} {
		req, _ := http.NewRequest(strings.Fields(tc.method)[0], srv.URL+"/api/messages", bytes.NewBufferString(tc.body))
		if tc.method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %.40s: %d, want %d", tc.method, tc.body, resp.StatusCode, tc.want)
		}
	}
	waitFor(t, "the notices", func() bool { mu.Lock(); defer mu.Unlock(); return len(notices) == 2 })
	for _, m := range notices {
		if m.From != n.Identifier() {
			t.Errorf("a published message from %q, want the node %q", m.From, n.Identifier())
		}
	}
}

// TestStateHandler: the node's world as JSON, read-only, limited.
func TestStateHandler(t *testing.T) {
	n, srv := startNode(t)
	for i := range 3 {
		props := gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(i))})
		if _, err := n.Apply([]gameworld.Change{{Type: gameworld.Add, ID: fmt.Sprintf("b-%d", i), Properties: props}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		method, query string
		want, objects int
	}{
		{"GET", "", 200, 3},
		{"GET", "?limit=2", 200, 2},
		{"GET", "?q=b-1", 200, 1},
		{"GET", "?limit=x", 400, -1},
		{"POST", "", 405, -1},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/api/state"+tc.query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st api.State
		if resp.StatusCode == 200 {
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || tc.objects >= 0 && len(st.Objects) != tc.objects {
			t.Errorf("%s %s: %d with %d objects, want %d with %d", tc.method, tc.query, resp.StatusCode, len(st.Objects), tc.want, tc.objects)
		}
	}
}
