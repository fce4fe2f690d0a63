package auth

import (
	"net/http"
	"slices"
	"time"
)

// PagePrefixes are the identifier prefixes a page of solipsism.js claims:
// its world's ("client" by default; "naf" for the networked-aframe
// adapter) and, when it connects from a WebWorker, the worker's
// ("webworker"), which stands in front of it as a proxy does.
var PagePrefixes = []string{"client", "naf", "webworker"}

// TokenEndpoint is an example of the token endpoint a login service puts
// in front of a node that requires tokens: the node's pages (and any
// browser app) fetch a token from it before each connection attempt
// (solipsism.js's getToken; the node names it to its own pages with
// --token-url). Its zero value is not usable: Key is required.
type TokenEndpoint struct {
	// Key signs the tokens: the node's --auth-key bytes (HS256) or an
	// Ed25519 private key.
	Key any
	// Grant decides what the request's user gets; a nil result refuses
	// the request (401). A real service checks its session cookie here.
	// Without Grant every caller gets PagePrefixes: for a demo or a
	// trusted network only.
	Grant func(r *http.Request) *Grant
	// TTL is how long a token lasts; zero means 10 minutes.
	TTL time.Duration
	// Origins are the page origins (scheme://host:port) allowed to read
	// the answer across origins (the node's own, say, when this runs
	// elsewhere); others get no CORS headers, so their pages cannot.
	Origins []string
}

// ServeHTTP answers a GET with a token, as text.
func (e *TokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && slices.Contains(e.Origins, o) {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("Vary", "Origin")
	}
	if r.Method != http.MethodGet {
		http.Error(w, "GET a token", http.StatusMethodNotAllowed)
		return
	}
	g := &Grant{Prefixes: PagePrefixes}
	if e.Grant != nil {
		g = e.Grant(r)
	}
	if g == nil {
		http.Error(w, "not signed in", http.StatusUnauthorized)
		return
	}
	ttl := e.TTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	grant := *g
	grant.Expires = time.Now().Add(ttl)
	grant.Admin = false // never from a page's endpoint
	tok, err := IssueGrant(e.Key, grant)
	if err != nil {
		http.Error(w, "cannot sign a token", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(tok)) //nolint:errcheck // the client sees a short answer
}
