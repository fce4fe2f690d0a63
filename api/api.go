package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// StateHandler serves the node's State as JSON, read-only: GET /api/state?limit=N&q=text.
// limit defaults to 1000 objects.
func StateHandler(n *relay.Node) http.Handler {
	return ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := 1000
		if v := r.URL.Query().Get("limit"); v != "" {
			l, err := strconv.Atoi(v)
			if err != nil {
				http.Error(w, "limit: want a number", http.StatusBadRequest)
				return
			}
			limit = l
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(StateOf(n, limit, r.URL.Query().Get("q")))
	}))
}

// ReadOnly passes GET and HEAD requests to h and answers any other method
// with 405: for endpoints that show state and change none.
func ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only endpoint", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// maxPublishBytes bounds a request body of MessagesHandler.
const maxPublishBytes = peer.DefaultMaxRecordBytes

// MessagesHandler is an HTTP endpoint for a backend to publish messages:
// POST a JSON object {"type":…,"data":…} with "room" or "world" if the
// message is for them, and "at" if it happens somewhere; the node sends
// it from its own world. It answers 202 once the message is on its way,
// 400 with the reason if it breaks a rule, 405 to other methods, 415 to a
// body not sent as application/json. Put it
// behind the admin token: whoever may call it speaks for the node.
func MessagesHandler(n *relay.Node) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "POST a message", http.StatusMethodNotAllowed)
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			// (A page elsewhere cannot post JSON here without CORS
			// letting it; a form could post anything else.)
			http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPublishBytes+1))
		if err != nil {
			http.Error(w, "reading the message: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > maxPublishBytes {
			http.Error(w, fmt.Sprintf("message over %d bytes", maxPublishBytes), http.StatusRequestEntityTooLarge)
			return
		}
		m, err := peer.Limits{}.DecodeAppMessage(json.RawMessage(body))
		if err == nil {
			err = n.Publish(m)
		}
		switch {
		case errors.Is(err, relay.ErrClosed):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
}
