package test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// appPage is an app's page, served from its own origin, that uses the
// library and the networked-aframe adapter from a node.
const appPage = `<!doctype html>
<script src="NODE/vendor/aframe-v1.7.1.min.js"></script>
<script src="NODE/vendor/networked-aframe-0.14.3.min.js"></script>
<script type="module">
window.errors = [];
try {
  // The library from the node, or from the app's own copy of the npm
  // package (?from=pkg).
  const lib = new URLSearchParams(location.search).get("from") === "pkg" ? "/pkg" : "NODE";
  const { connect } = await import(lib + "/solipsism.js");
  await import(lib + "/naf-adapter.js");
  window.cfg = await (await fetch("NODE/config.json")).json();
  const q = new URLSearchParams(location.search);
  const worker = q.get("worker") === "1";
  // With ?token=1, a token from the app's own login service before every
  // connection attempt, as a node with --auth-key wants.
  const getToken = q.get("token") === "1" ? async () => (await fetch("/token")).text() : undefined;
  window.s = connect({ url: "WS", worker, getToken });
  window.closes = [];
  window.s.addEventListener("close", (e) => closes.push(e.detail));
  window.s.world.create({ kind: "visitor" });
} catch (e) {
  window.errors.push(String(e));
}
</script>`

// serveApp serves appPage for the node at nodeAddr from a server of its
// own, on localhost: another origin than the node's 127.0.0.1. token, if
// not empty, is what its login service at /token hands out.
func serveApp(t *testing.T, nodeAddr, token string) string {
	t.Helper()
	page := strings.NewReplacer("NODE", "http://"+nodeAddr, "WS", "ws://"+nodeAddr+"/ws").Replace(appPage)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	// The npm package's files, as an app serves them from node_modules.
	mux.Handle("/pkg/", http.StripPrefix("/pkg/", http.FileServer(http.Dir("../web"))))
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, token)
	})
	mux.HandleFunc("/app.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://localhost:" + port + "/app.html"
}

// TestAppFromAnotherOrigin: an app's page on its own origin loads the
// library and the networked-aframe adapter from a node started with
// --origin naming that origin, reads its /config.json, and connects, on
// the page and through a worker; or loads them from its own copy of the
// npm package and connects through a worker. Each sees the node's world
// and the node sees its object. A node without --origin refuses the page: the import
// fails, and nothing connects.
func TestAppFromAnotherOrigin(t *testing.T) {
	browser := newBrowser(t)
	node := startProc(t, "--origin", "localhost:*")
	peer := wiretest.Dial(t, node.URL(), "client-AAAAAAAA-origin00", wiretest.Options{})
	waitAsked(t, peer)
	peer.Change(wiretest.Add("lamp", peer.ID, map[string]any{"kind": "lamp"}))
	app := serveApp(t, node.Addr, "")
	for _, mode := range []string{"0", "1", "1&from=pkg"} {
		p, _ := tab(t, browser, "app-worker-"+mode, app+"?worker="+mode)
		waitJS(t, p, "connected from another origin (worker="+mode+")",
			`window.s && s.status === "connected" && [...s.world.objects.values()].some(o => o.properties.kind === "lamp")`)
		if errs := evalJS[[]any](t, p, `window.errors`); len(errs) > 0 {
			t.Fatalf("worker=%s: %v", mode, errs)
		}
		if want := map[string]string{"0": "main", "1": "worker", "1&from=pkg": "worker"}[mode]; evalJS[string](t, p, `s.mode`) != want {
			t.Errorf("worker=%s: mode %s", mode, evalJS[string](t, p, `s.mode`))
		}
		if !evalJS[bool](t, p, `!!(NAF.adapters.adapters && NAF.adapters.adapters.solipsism || NAF.adapters.make && NAF.adapters.make("solipsism"))`) {
			t.Errorf("worker=%s: the adapter is not registered", mode)
		}
	}
	peer.Wait("the pages' visitors", 10*time.Second, func(m map[string]wiretest.Object) bool {
		n := 0
		for _, o := range m {
			if string(o.Properties["kind"]) == `"visitor"` {
				n++
			}
		}
		return n == 3
	})

	closed := startProc(t)
	p, _ := tab(t, browser, "app-refused", serveApp(t, closed.Addr, ""))
	waitJS(t, p, "the import refused", `window.errors && errors.length > 0`)
	if evalJS[bool](t, p, `!!window.s`) {
		t.Error("a page of another origin connected to a node without --origin")
	}
}

// TestAppFromAnotherOriginWithTokens: the same app against a node that
// requires tokens: its page gets one from the app's own login service
// before each connection attempt and connects, on the page and through a
// worker; without one it is refused, said as such (401).
func TestAppFromAnotherOriginWithTokens(t *testing.T) {
	browser := newBrowser(t)
	key := strings.Repeat("ab", 32)
	node := startProc(t, "--origin", "localhost:*", "--auth-key", key)
	out, err := runBinary(nodeBinary(t), []string{"token", "--key", key, "--prefix", "client,webworker", "--ttl", "10m"}, nil)
	if err != nil {
		t.Fatalf("token: %v\n%s", err, out)
	}
	app := serveApp(t, node.Addr, strings.TrimSpace(out))
	for _, mode := range []string{"0", "1"} {
		p, _ := tab(t, browser, "app-token-"+mode, app+"?token=1&worker="+mode)
		waitJS(t, p, "connected with a token (worker="+mode+")", `window.s && s.status === "connected"`)
		if errs := evalJS[[]any](t, p, `window.errors`); len(errs) > 0 {
			t.Fatalf("worker=%s: %v", mode, errs)
		}
	}
	p, _ := tab(t, browser, "app-no-token", app+"?worker=0")
	waitJS(t, p, "refused without a token, said as such", `window.closes && closes.some(c => c.status === 401)`)
	if evalJS[string](t, p, `s.status`) == "connected" {
		t.Fatal("connected without a token")
	}
}
