package web

import (
	"embed"
	"encoding/json"
	"net/http"
)

//go:embed *.html *.js vendor/*.js vendor/LICENSES.txt
var files embed.FS

// Options configure Handler. The zero value serves pages for a node
// without authentication.
type Options struct {
	// TokenURL is where the pages get a token before each connection
	// attempt, for a node that requires them (see auth.TokenEndpoint):
	// told to them at /config.json. Empty: the pages connect without one.
	TokenURL string
}

// Handler serves the 3D demo at /, the 2D one at /2d, the inspector at
// /inspect, the networked-aframe example at /naf.html, and the JavaScript
// modules (and pinned third-party builds, under /vendor/) beside them.
func Handler() http.Handler { return HandlerWith(Options{}) }

// HandlerWith is Handler with options; it also serves /config.json, what
// the pages need to know of their node: {"tokenURL": …} or {}.
func HandlerWith(opts Options) http.Handler {
	static := http.FileServerFS(files)
	config, _ := json.Marshal(struct {
		TokenURL string `json:"tokenURL,omitempty"`
	}{opts.TokenURL})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/config.json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Write(config) //nolint:errcheck // a short answer
		case "/", "/index.html":
			http.ServeFileFS(w, r, files, "index.html")
		case "/2d", "/2d/":
			http.ServeFileFS(w, r, files, "2d.html")
		case "/inspect", "/inspect/":
			http.ServeFileFS(w, r, files, "inspect.html")
		default:
			static.ServeHTTP(w, r)
		}
	})
}
