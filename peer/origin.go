package peer

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// AllowOrigin lets a page of another origin that patterns admit (matched
// as AcceptOptions.OriginPatterns are) read the answer to r (CORS): a
// node's library and /config.json, and why it refused a handshake, which
// a browser otherwise hides. Cookies are never shared (no
// Allow-Credentials).
func AllowOrigin(w http.ResponseWriter, r *http.Request, patterns []string) {
	origin := r.Header.Get("Origin")
	if origin == "" || len(patterns) == 0 {
		return
	}
	w.Header().Add("Vary", "Origin")
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			return
		}
	}
}
