package web

import (
	"embed"
	"net/http"
)

//go:embed *.html *.js vendor/*.js vendor/LICENSES.txt
var files embed.FS

// Handler serves the 3D demo at /, the 2D one at /2d, the inspector at
// /inspect, the networked-aframe example at /naf.html, and the JavaScript
// modules (and pinned third-party builds, under /vendor/) beside them.
func Handler() http.Handler {
	static := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
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
