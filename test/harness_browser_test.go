package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/web"
)

// Browsers' harness: Debian's Chromium through chromedp, tabs, pages' logs
// and screenshots, JavaScript evaluated in a page.

// chromiumPath finds Debian's Chromium. Outside CI the browser tests skip
// without it; in CI they fail, since .ci/run installs it.
func chromiumPath(t testing.TB) string {
	return toolPath(t, "Chromium", "chromium", "chromium", "chromium-browser", "google-chrome")
}

// toolPath finds the first of names on PATH. Outside CI the tests that
// need it skip without it; in CI they fail, since .ci/run installs the
// Debian package pkg.
func toolPath(t testing.TB, what, pkg string, names ...string) string {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found; .ci/run installs it with apt-get install -y %s", what, pkg)
	}
	t.Skipf("these tests need %s: apt-get install -y %s (Debian) and run go test again", what, pkg)
	return ""
}

// newBrowser starts headless Chromium with a fresh profile, no sandbox, no
// GPU and no background networking.
func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(900, 560),
	)
	opts = append(opts, extra...)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() })
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return bctx
}

// tab opens a new tab at url. Its screenshot is saved if the test fails.
func tab(t *testing.T, browser context.Context, name, url string) (context.Context, context.CancelFunc) {
	t.Helper()
	ctx, cancel, _ := openTab(t, browser, name, url, "")
	return ctx, cancel
}

// tabWithin is tab, and also returns what the page requested from
// anywhere but origin (scheme://host:port) so far: a page served by a
// node must need nothing else (no CDN, no font service).
func tabWithin(t *testing.T, browser context.Context, name, url, origin string) (context.Context, func() []string) {
	t.Helper()
	ctx, _, outside := openTab(t, browser, name, url, origin)
	return ctx, outside
}

// noneOutside fails t for each page (by name, what tabWithin returned)
// that requested anything from outside its node.
func noneOutside(t *testing.T, pages map[string]func() []string) {
	t.Helper()
	for name, outside := range pages {
		if o := outside(); len(o) > 0 {
			t.Errorf("page %s requested from outside its node: %v", name, o)
		}
	}
}

func openTab(t *testing.T, browser context.Context, name, url, origin string) (context.Context, context.CancelFunc, func() []string) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(func() {
		if t.Failed() && ctx.Err() == nil {
			saveScreenshot(t, ctx, name)
		}
		cancel()
	})
	var mu sync.Mutex
	var outside []string
	if origin != "" {
		wsOrigin := "ws" + strings.TrimPrefix(origin, "http")
		err := chromedp.Listen(ctx, func(ev any) {
			e, ok := ev.(*network.EventRequestWillBeSent)
			if !ok {
				return
			}
			u := e.Request.URL
			for _, ok := range []string{origin + "/", wsOrigin + "/", "data:", "blob:", "about:"} {
				if strings.HasPrefix(u, ok) {
					return
				}
			}
			mu.Lock()
			outside = append(outside, u)
			mu.Unlock()
		})
		if err == nil {
			_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("%s: navigate %s: %v", name, url, err)
	}
	return ctx, cancel, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(outside)
	}
}

func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot of %s: %v", name, err)
		return
	}
	dir := filepath.Join("screenshots")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err == nil {
		t.Logf("screenshot of %s saved to test/%s", name, path)
	}
}

// waitJS polls a JavaScript expression in a tab until it is truthy.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// mediaBrowser is newBrowser with fake media devices (a microphone that
// beeps), permission granted without asking, audio that plays without a
// gesture, and WebRTC over loopback (the only network here).
func mediaBrowser(t testing.TB) context.Context {
	return newBrowser(t, chromedp.Flag("use-fake-device-for-media-stream", true), chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"), chromedp.Flag("allow-loopback-in-peer-connection", true))
}

// awaitJS evaluates an expression whose value is a promise, and returns
// what it resolves to.
func awaitJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// startWebNode serves a node at /ws and the web pages at / behind a test
// server; handlers for other paths may be added to mux before the first
// request.
func startWebNode(tb testing.TB, opts relay.Options) (*relay.Node, *httptest.Server, *http.ServeMux) {
	tb.Helper()
	node, err := relay.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", node)
	mux.Handle("/", web.Handler())
	front := httptest.NewServer(mux)
	tb.Cleanup(func() { node.Close(context.Background()); front.Close() })
	return node, front, mux
}
