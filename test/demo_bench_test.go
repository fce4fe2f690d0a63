package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"
)

// BenchmarkDemo3D measures what a user of the 3D demo pays, in headless
// Chromium (software rendering, so frame rates are a floor):
//
// bytes the page loads (documents, scripts, the worker) and the time from
// navigation until the first other avatar is shown; frames per second with
// 50 other avatars walking at 10 Hz, beside the same page alone in its
// world, measured in the same run.
//
//	go test ./test -run '^$' -bench Demo3D -benchtime 1x
func BenchmarkDemo3D(b *testing.B) {
	for i := 0; i < b.N; i++ {
		browser := newBrowser(b)
		_, front, _ := startWebNode(b, relay.Options{})
		ws := "ws" + front.URL[len("http"):] + "/ws"

		// Alone: frames per second with nobody else.
		alone := pageFPS(b, browser, front.URL+"/?name=alone", 0)

		// One other avatar for the first-avatar time, then 50.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		walkers := make([]*client.Client, 50)
		for k := range walkers {
			c, err := client.Dial(ctx, ws, client.Options{Prefix: "walker", Tick: 50 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			walkers[k] = c
			id, _ := c.Create(map[string]any{"kind": "avatar3d", "name": fmt.Sprint("w", k), "color": "#8fb4ff", "position": []float64{float64(k%10) - 5, 1.6, float64(k/10) - 5}, "rotation": []float64{0, 0}})
			go func() {
				for step := 0; ctx.Err() == nil; step++ {
					time.Sleep(100 * time.Millisecond)
					x := float64(k%10) - 5 + float64(step%20)/10
					c.Set(id, map[string]any{"position": []float64{x, 1.6, float64(k/10) - 5}})
				}
			}()
		}
		pctx, pcancel := chromedp.NewContext(browser)
		start := time.Now()
		if _, err := chromedp.Run(pctx, chromedp.Navigate(front.URL+"/?name=measured")); err != nil {
			b.Fatal(err)
		}
		if _, err := chromedp.Run(pctx, chromedp.Poll[chromedp.Void](`window.demo && demo.avatars().length > 0`, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			b.Fatal(err)
		}
		first := time.Since(start)
		bytes, err := chromedp.Run(pctx, chromedp.Evaluate[float64](`performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).reduce((s, e) => s + (e.encodedBodySize || e.transferSize || 0), 0)`))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := chromedp.Run(pctx, chromedp.Poll[chromedp.Void](`demo.avatars().length >= 50`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			b.Fatal(err)
		}
		crowd := measureFPS(b, pctx)
		pcancel()
		cancel()
		for _, c := range walkers {
			c.Close()
		}
		b.Logf("page %.0f KiB, first avatar after %s, %.1f fps with 50 avatars, %.1f fps alone", bytes/1024, first.Round(time.Millisecond), crowd, alone)
		b.ReportMetric(bytes/1024, "KiB-page")
		b.ReportMetric(first.Seconds()*1000, "ms-first-avatar")
		b.ReportMetric(crowd, "fps-50-avatars")
		b.ReportMetric(alone, "fps-alone")
	}
}

// pageFPS opens url and measures its frame rate.
func pageFPS(b *testing.B, browser context.Context, url string, _ int) float64 {
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		b.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`window.demo && demo.session.status === "connected"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.Fatal(err)
	}
	return measureFPS(b, ctx)
}

// measureFPS counts the demo's frames over five seconds.
func measureFPS(b *testing.B, ctx context.Context) float64 {
	f0, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`demo.frames()`))
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	f1, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`demo.frames()`))
	if err != nil {
		b.Fatal(err)
	}
	return (f1 - f0) / 5
}
