package web

import (
	"embed"

	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/solipsism/mesh/peer"
)

//go:embed *.js lib/*.js vendor/*.js vendor/LICENSES.txt
var files embed.FS

// demoFiles are the demos and the inspector, apart from the library but
// served at the root beside it (/demo3d.js, /naf.html).
//
//go:embed demos
var demoFiles embed.FS

// Options configure Handler. The zero value serves pages for a node
// without authentication.
type Options struct {
	// TokenURL is where the pages get a token before each connection
	// attempt, for a node that requires them (see auth.TokenEndpoint):
	// told to them at /config.json. Empty: the pages connect without one.
	TokenURL string
	// OriginPatterns are the other origins whose pages may load the
	// library (solipsism.js, lib/, naf-adapter.js, voice.js) and read
	// /config.json: host patterns as path.Match takes them, matched
	// against the host (and port) of a request's Origin, or against
	// scheme://host for a pattern with "://", as the node's WebSocket
	// endpoints match theirs ("*" for any). Nil: the node's own
	// pages only (browsers refuse a module script from another origin
	// without CORS).
	OriginPatterns []string
	// ICEServers are the STUN and TURN servers the pages' WebRTC media
	// (voice.js) uses, as RTCIceServer objects: told to them at
	// /config.json. Empty: none (peers on one network still connect).
	ICEServers []ICEServer
}

// ICEServer is one STUN or TURN server, as WebRTC's RTCIceServer.
type ICEServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// ParseICEServers reads a JSON list of RTCIceServer objects, as a page
// would give RTCPeerConnection: "urls" a string or a list of stun:,
// stuns:, turn: or turns: URLs.
func ParseICEServers(s string) ([]ICEServer, error) {
	var raw []struct {
		URLs       json.RawMessage `json:"urls"`
		Username   string          `json:"username"`
		Credential string          `json:"credential"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("want a JSON list of {\"urls\": …}: %w", err)
	}
	out := make([]ICEServer, 0, len(raw))
	for i, r := range raw {
		var urls []string
		var one string
		if json.Unmarshal(r.URLs, &one) == nil {
			urls = []string{one}
		} else if json.Unmarshal(r.URLs, &urls) != nil || len(urls) == 0 {
			return nil, fmt.Errorf("server %d: urls must be a URL or a list of them", i)
		}
		for _, u := range urls {
			scheme, _, _ := strings.Cut(u, ":")
			switch scheme {
			case "stun", "stuns", "turn", "turns":
			default:
				return nil, fmt.Errorf("server %d: %q is not a stun:, stuns:, turn: or turns: URL", i, u)
			}
		}
		out = append(out, ICEServer{URLs: urls, Username: r.Username, Credential: r.Credential})
	}
	return out, nil
}

// Handler serves the 3D demo at /, the 2D one at /2d, the voxel builder at
// /voxel, the inspector at
// /inspect, the networked-aframe example at /naf.html, and the JavaScript
// modules (and pinned third-party builds, under /vendor/) beside them.
func Handler() http.Handler { return HandlerWith(Options{}) }

// HandlerWith is Handler with options; it also serves /config.json, what
// the pages need to know of their node: {"tokenURL": …, "iceServers": […]},
// each key only if set.
func HandlerWith(opts Options) http.Handler {
	static := http.FileServerFS(files)
	demos, _ := fs.Sub(demoFiles, "demos")
	demoStatic := http.FileServerFS(demos)
	config, _ := json.Marshal(struct {
		TokenURL   string      `json:"tokenURL,omitempty"`
		ICEServers []ICEServer `json:"iceServers,omitempty"`
	}{opts.TokenURL, opts.ICEServers})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer.AllowOrigin(w, r, opts.OriginPatterns)
		switch r.URL.Path {
		case "/config.json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Write(config) //nolint:errcheck // a short answer
		case "/", "/index.html":
			http.ServeFileFS(w, r, demos, "index.html")
		case "/2d", "/2d/":
			http.ServeFileFS(w, r, demos, "2d.html")
		case "/voxel", "/voxel/":
			http.ServeFileFS(w, r, demos, "voxel.html")
		case "/inspect", "/inspect/":
			http.ServeFileFS(w, r, demos, "inspect.html")
		default:
			if st, err := fs.Stat(demos, strings.TrimPrefix(r.URL.Path, "/")); err == nil && !st.IsDir() {
				demoStatic.ServeHTTP(w, r)
				return
			}
			static.ServeHTTP(w, r)
		}
	})
}
