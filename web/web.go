package web

import (
	"embed"
	"net/http"
)

//go:embed *.html *.js vendor/*.js vendor/LICENSES.txt
var files embed.FS

// Handler serves the demo at /, the inspector at /inspect and the
// JavaScript modules beside them.
func Handler() http.Handler {
	static := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/", "/index.html":
			http.ServeFileFS(w, r, files, "index.html")
		case "/inspect", "/inspect/":
			http.ServeFileFS(w, r, files, "inspect.html")
		default:
			static.ServeHTTP(w, r)
		}
	})
}
