package test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/web"
)

// loudnessJS defines window.loudness(stream, ms, enough): the peak sample
// of a stream's audio over ms milliseconds (8,000 by default), or as soon
// as it reaches enough, through WebAudio (the stream also plays, muted,
// in an audio element: Chromium feeds a remote stream to WebAudio only
// then).
const loudnessJS = `window.loudness = async (stream, ms = 8000, enough = 0.5) => {
  const el = new Audio(); el.muted = true; el.srcObject = stream; el.play().catch(() => {});
  const ctx = new AudioContext(); await ctx.resume();
  const an = ctx.createAnalyser(); an.fftSize = 2048; ctx.createMediaStreamSource(stream).connect(an);
  const buf = new Float32Array(an.fftSize); let peak = 0;
  for (const end = performance.now() + ms; performance.now() < end && peak < enough; await new Promise((r) => setTimeout(r, 40))) {
    an.getFloatTimeDomainData(buf); for (const v of buf) peak = Math.max(peak, Math.abs(v));
  }
  ctx.close(); el.srcObject = null; return peak;
}, true`

// injector relays WebSocket connections between the pages and the node and
// can slip extra messages to the pages: the test hook for malformed input.
type injector struct {
	target string
	mu     sync.Mutex
	conns  map[*websocket.Conn]*sync.Mutex
}

func (in *injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	page, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	page.SetReadLimit(64 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node, _, err := websocket.Dial(ctx, in.target, nil)
	if err != nil {
		page.Close(websocket.StatusInternalError, "cannot reach the node")
		return
	}
	node.SetReadLimit(64 << 20)
	wmu := &sync.Mutex{}
	in.mu.Lock()
	in.conns[page] = wmu
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.conns, page)
		in.mu.Unlock()
		page.CloseNow()
		node.CloseNow()
	}()
	go func() {
		defer cancel()
		for {
			typ, b, err := page.Read(ctx)
			if err != nil || node.Write(ctx, typ, b) != nil {
				return
			}
		}
	}()
	for {
		typ, b, err := node.Read(ctx)
		if err != nil {
			return
		}
		wmu.Lock()
		err = page.Write(ctx, typ, b)
		wmu.Unlock()
		if err != nil {
			return
		}
	}
}

func (in *injector) inject(typ websocket.MessageType, msg string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	for c, wmu := range in.conns {
		wmu.Lock()
		c.Write(context.Background(), typ, []byte(msg))
		wmu.Unlock()
	}
	return len(in.conns)
}

func TestBrowserDemo(t *testing.T) {
	browser := newBrowser(t)
	var logger *slog.Logger
	if os.Getenv("SOLIPSISM_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	node, err := relay.New(relay.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	inner := httptest.NewServer(node)
	t.Cleanup(func() { node.Close(context.Background()); inner.Close() })
	// inner serves the node itself at its root.
	inj := &injector{target: "ws" + strings.TrimPrefix(inner.URL, "http"), conns: map[*websocket.Conn]*sync.Mutex{}}
	mux := http.NewServeMux()
	mux.Handle("/ws", inj)
	mux.Handle("/api/state", api.StateHandler(node))
	mux.Handle("/", web.Handler())
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)

	alice, closeAlice := tab(t, browser, "alice", front.URL+"/2d?name=alice") // WebWorker mode, the default
	bob, _ := tab(t, browser, "bob", front.URL+"/2d?name=bob&mode=main")      // main thread
	waitJS(t, alice, "alice connected", `window.demo && demo.session.status === "connected" && demo.mode === "worker"`)
	waitJS(t, bob, "bob connected", `window.demo && demo.session.status === "connected" && demo.mode === "main"`)

	t.Run("avatars appear", func(t *testing.T) {
		waitJS(t, alice, "alice sees bob", `demo.avatars().some(a => a.name === "bob")`)
		waitJS(t, bob, "bob sees alice", `demo.avatars().some(a => a.name === "alice")`)
	})

	// moveAndSee moves who's avatar with real mouse events and waits until
	// other shows it there, the drawn position having glided to it.
	moveAndSee := func(t *testing.T, who context.Context, whoName string, other context.Context, x, y float64) {
		t.Helper()
		if err := chromedp.Do(who, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y)); err != nil {
			t.Fatal(err)
		}
		wx := evalJS[float64](t, who, `demo.me.properties.x`)
		wy := evalJS[float64](t, who, `demo.me.properties.y`)
		waitJS(t, other, whoName+" moved", fmt.Sprintf(`demo.avatars().some(a => a.name === %q && a.x === %v && a.y === %v && Math.abs(a.shownX - a.x) < 0.5 && Math.abs(a.shownY - a.y) < 0.5)`, whoName, wx, wy))
	}
	t.Run("avatars move", func(t *testing.T) {
		moveAndSee(t, alice, "alice", bob, 300, 200)
		moveAndSee(t, bob, "bob", alice, 600, 350)
		moveAndSee(t, alice, "alice", bob, 120, 400)
		// Keys move too.
		before := evalJS[float64](t, bob, `demo.me.properties.x`)
		if err := chromedp.Do(bob, chromedp.KeyEvent("d")); err != nil {
			t.Fatal(err)
		}
		waitJS(t, alice, "bob moved by key", fmt.Sprintf(`demo.avatars().some(a => a.name === "bob" && a.x !== %v)`, before))
	})

	t.Run("two pages pass the ball back and forth", func(t *testing.T) {
		waitJS(t, alice, "alice sees the ball", `!!demo.ball()`)
		waitJS(t, bob, "bob sees the ball", `!!demo.ball()`)
		aliceID := evalJS[string](t, alice, `demo.session.world.identifier`)
		bobID := evalJS[string](t, bob, `demo.session.world.identifier`)
		// pressAndThrow grabs the ball on who's page with a real press
		// on it, carries it with real mouse moves and throws it by
		// releasing while moving; other sees who own it, then the ball
		// come to rest where who's page put it.
		pressAndThrow := func(t *testing.T, who context.Context, whoID string, other context.Context) {
			t.Helper()
			at := evalJS[map[string]float64](t, who, `(() => { const b = demo.ball(); return demo.toScreen(b.properties.x, b.properties.y); })()`)
			if err := chromedp.Do(who, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at["x"], at["y"])); err != nil {
				t.Fatal(err)
			}
			if err := chromedp.Do(who, chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, at["x"], at["y"], chromedp.ButtonLeft)); err != nil {
				t.Fatal(err)
			}
			waitJS(t, who, "the grab", `demo.ball().owned && demo.holding()`)
			waitJS(t, other, "the other page sees the new owner", fmt.Sprintf(`demo.ball().owner === %q`, whoID))
			for i := 1; i <= 5; i++ {
				if err := chromedp.Do(who, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at["x"]+float64(i*4), at["y"]+float64(i*2), chromedp.ButtonLeft)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(15 * time.Millisecond)
			}
			if err := chromedp.Do(who, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, at["x"]+20, at["y"]+10, chromedp.ButtonLeft)); err != nil {
				t.Fatal(err)
			}
			waitJS(t, who, "the ball flies and comes to rest", `!demo.holding() && demo.ball().properties.vx === 0 && demo.ball().properties.vy === 0`)
			x, y := evalJS[float64](t, who, `demo.ball().properties.x`), evalJS[float64](t, who, `demo.ball().properties.y`)
			waitJS(t, other, "the other page sees it at rest", fmt.Sprintf(`demo.ball().properties.x === %v && demo.ball().properties.y === %v`, x, y))
		}
		pressAndThrow(t, alice, aliceID, bob)
		pressAndThrow(t, bob, bobID, alice)
		pressAndThrow(t, alice, aliceID, bob)
		waitJS(t, bob, "bob lost it", `!demo.ball().owned`)
		if errs := evalJS[[]string](t, alice, `demo.errors`); len(errs) > 0 {
			t.Fatalf("alice's page: %v", errs)
		}
	})

	t.Run("inspector lists both", func(t *testing.T) {
		insp, _ := tab(t, browser, "inspector", front.URL+"/inspect")
		alicePage := evalJS[string](t, alice, `demo.session.world.identifier`)
		bobPage := evalJS[string](t, bob, `demo.session.world.identifier`)
		// Alice's link is her worker's, with her page behind it.
		waitJS(t, insp, "both links listed", fmt.Sprintf(`(() => { const t = document.querySelector("#links tbody").textContent; return t.includes(%q) && t.includes(%q) && t.includes("webworker-"); })()`, alicePage, bobPage))
		waitJS(t, insp, "objects listed", `document.querySelectorAll("#objects tbody tr").length === 3`) // two avatars and the ball
		waitJS(t, insp, "regions shown", `[...document.querySelectorAll("#links tbody td.region")].filter(td => td.textContent.includes("]–[")).length === 2`)
		waitJS(t, insp, "rates plotted", `document.getElementById("rates").getContext("2d").getImageData(0,0,800,260).data.some(v => v !== 0)`)
	})

	t.Run("a region hides what is outside it", func(t *testing.T) {
		// Alice, in a worker, looks at a corner of the world where bob is not.
		evalJS[any](t, alice, `demo.session.setInterest({min: [-5, -5, -1], max: [5, 5, 1]}), null`)
		waitJS(t, alice, "bob out of alice's region", `!demo.avatars().some(a => a.name === "bob")`)
		time.Sleep(500 * time.Millisecond)
		t.Logf("DEBUG alice errors %v status %v", evalJS[[]string](t, alice, `demo.errors`), evalJS[string](t, alice, `demo.session.status`))
		waitJS(t, bob, "bob still sees alice", `demo.avatars().some(a => a.name === "alice")`)
		evalJS[any](t, alice, `demo.session.setInterest(null), null`)
		waitJS(t, alice, "bob back", `demo.avatars().some(a => a.name === "bob")`)
	})

	t.Run("malformed messages do not break the pages", func(t *testing.T) {
		for _, m := range []string{
			`not json at all`, `[]`, `{"a":1}`, `[1,2]`, `["noSuchType",{"x":1}]`,
			`["worldChange",{"changes":"nope"}]`, `["worldChange",{"changes":[{"type":"add"},{"type":"explode","id":"x"},null,5]}]`,
			`["worldChange",null]`, `["metadataChange",5]`, `["metadata",{"identifierChain":[1,2]}]`,
			`["worldChange",{"timestamp":1,"changes":[{"type":"remove","id":"never-seen"}]}]`,
		} {
			if n := inj.inject(websocket.MessageText, m); n != 2 {
				t.Fatalf("injected into %d connections, want 2", n)
			}
		}
		inj.inject(websocket.MessageBinary, "\x00\x01binary")
		moveAndSee(t, alice, "alice", bob, 500, 100)
		moveAndSee(t, bob, "bob", alice, 250, 250)
		for _, p := range []context.Context{alice, bob} {
			if errs := evalJS[[]string](t, p, `demo.errors`); len(errs) > 0 {
				t.Fatalf("page errors: %v", errs)
			}
			if st := evalJS[string](t, p, `demo.session.status`); st != "connected" {
				t.Fatalf("status %s after malformed input", st)
			}
		}
	})

	t.Run("a closed page disappears", func(t *testing.T) {
		closeAlice() // closes the target: the page and its worker go away
		waitJS(t, bob, "alice gone", `!demo.avatars().some(a => a.name === "alice")`)
		if errs := evalJS[[]string](t, bob, `demo.errors`); len(errs) > 0 {
			t.Fatalf("page errors: %v", errs)
		}
	})
}
