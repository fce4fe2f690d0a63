package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOrigins: the library and /config.json answer CORS to the origins
// the patterns admit, and to no other.
func TestOrigins(t *testing.T) {
	for _, tc := range []struct {
		name     string
		patterns []string
		origin   string
		allowed  bool
	}{
		{"no patterns", nil, "http://app.example:3000", false},
		{"no origin", []string{"*"}, "", false},
		{"any", []string{"*"}, "http://app.example:3000", true},
		{"host and port", []string{"app.example:3000"}, "http://app.example:3000", true},
		{"case", []string{"APP.example:*"}, "http://app.EXAMPLE:3000", true},
		{"another port", []string{"app.example:3000"}, "http://app.example:4000", false},
		{"another host", []string{"app.example:*"}, "http://evil.example:3000", false},
		{"with a scheme", []string{"https://app.example"}, "https://app.example", true},
		{"with the wrong scheme", []string{"https://app.example"}, "http://app.example", false},
		{"not a URL", []string{"*"}, "null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(HandlerWith(Options{OriginPatterns: tc.patterns, TokenURL: "/token"}))
			defer srv.Close()
			for _, path := range []string{"/solipsism.js", "/lib/world.js", "/naf-adapter.js", "/voice.js", "/config.json"} {
				req, _ := http.NewRequest("GET", srv.URL+path, nil)
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got := resp.Header.Get("Access-Control-Allow-Origin")
				if resp.StatusCode != 200 || (got != "") != tc.allowed || tc.allowed && got != tc.origin {
					t.Errorf("%s: %d, Access-Control-Allow-Origin %q", path, resp.StatusCode, got)
				}
				if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
					t.Errorf("%s shares credentials", path)
				}
			}
		})
	}
}
