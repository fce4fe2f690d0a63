package test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// floodProxy floods a proxy (started with extra flags) from its upstream:
// a server that, once the proxy has said who it is, sends it 705,500
// distinct objects of 706 owners, 500 a message and 1,000 per owner, each
// with a 100-byte property, as fast as the proxy reads them (the proxy
// holds at most --max-world-objects, 500,000 by default). Meanwhile the
// proxy's RSS is read every 50 ms (watchers clients of the proxy see
// everything) and its /healthz asked every 100 ms (1 s
// timeout). It returns the peak RSS, the slowest /healthz answer, how
// many did not come within the second, the objects the proxy held at the
// end and how long the flood took to send.
func floodProxy(tb testing.TB, watchers int, env []string, extra ...string) (peak int64, slowest time.Duration, timeouts, held int, took time.Duration) {
	tb.Helper()
	const owners, perOwner, perMessage = 706, 1000, 500
	pad := strings.Repeat("x", 100)
	sent := make(chan time.Duration, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(64 << 20)
		ctx := r.Context()
		c.Write(ctx, websocket.MessageText, []byte(`["requestMetadata"]`))
		for {
			_, m, err := c.Read(ctx)
			if err != nil {
				return
			}
			if strings.HasPrefix(string(m), `["metadata`) {
				break
			}
		}
		c.Write(ctx, websocket.MessageText, []byte(`["metadataChange",{"identifier":"server-FLOODFLO-ODFLOODF","identifierChain":["server-FLOODFLO-ODFLOODF"],"role":"server"}]`))
		go func() { // the proxy's refresh answer and the rest: read and dropped
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		t0 := time.Now()
		var b strings.Builder
		for m := range owners * perOwner / perMessage {
			b.Reset()
			b.WriteString(`["worldChange",{"timestamp":1,"changes":[`)
			for k := range perMessage {
				n := m*perMessage + k
				if k > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"type":"add","id":"f-%07d","owner":"world-%08d-%08d","properties":{"p":"%s"}}`, n, n/perOwner, n/perOwner, pad)
			}
			b.WriteString(`]}]`)
			if c.Write(ctx, websocket.MessageText, []byte(b.String())) != nil {
				return
			}
		}
		sent <- time.Since(t0)
		<-ctx.Done()
	}))
	tb.Cleanup(up.Close)
	upURL := "ws" + strings.TrimPrefix(up.URL, "http") + "/ws"
	p := startProcEnv(tb, env, append([]string{"--role", "proxy", "--upstream", upURL}, extra...)...)
	// Clients of the proxy that see everything, reading as fast as they
	// can and dropping it: the proxy queues for them what it takes in.
	for i := range watchers {
		floodClient(tb, p.URL(), fmt.Sprintf("watch-%08d-%08d", i, i))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	pid := p.cmd.Process.Pid
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, rss := procUsage(tb, pid); rss > 0 {
				mu.Lock()
				peak = max(peak, rss)
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		hc := &http.Client{Timeout: time.Second}
		for ctx.Err() == nil {
			t0 := time.Now()
			resp, err := hc.Get("http://" + p.Addr + "/healthz")
			d := time.Since(t0)
			if resp != nil {
				resp.Body.Close()
			}
			mu.Lock()
			slowest = max(slowest, d)
			if err != nil {
				timeouts++
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	select {
	case took = <-sent:
	case <-time.After(2 * time.Minute):
		tb.Fatal("the flood was not taken in 2 minutes")
	}
	// Until the proxy's world stops growing.
	last, still := -1, 0
	for still < 3 {
		time.Sleep(time.Second)
		n := int(nodeMetricOf(tb, p.Addr, "solipsism_objects"))
		if n == last {
			still++
		} else {
			still, last = 0, n
		}
	}
	cancel()
	wg.Wait()
	return peak, slowest, timeouts, last, took
}

// nodeMetricOf reads a metric of the node at addr, whatever its labels
// (the first sample).
func nodeMetricOf(tb testing.TB, addr, name string) float64 {
	_, body := httpGet(tb, "http://"+addr+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// BenchmarkProxyFlood: a proxy whose upstream floods it with 705,500
// distinct objects of 706 owners (floodProxy): its peak RSS, its slowest
// /healthz answer and how many took more than a second: without clients,
// with 4 clients that see everything, and with those and Go's soft memory
// limit (GOMEMLIMIT) at 320 MiB.
//
//	go test ./test -run '^$' -bench ProxyFlood -benchtime 1x
func BenchmarkProxyFlood(b *testing.B) {
	for _, tc := range []struct {
		name     string
		watchers int
		env      []string
	}{{"no clients", 0, nil}, {"4 clients", 4, nil}, {"4 clients, GOMEMLIMIT=320MiB", 4, []string{"GOMEMLIMIT=320MiB"}}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				peak, slowest, timeouts, held, took := floodProxy(b, tc.watchers, tc.env)
				b.Logf("%s: flood sent in %v; peak RSS %d MiB, slowest /healthz %v, %d over 1 s, %d objects held", tc.name, took.Round(time.Millisecond), peak>>20, slowest.Round(time.Millisecond), timeouts, held)
				b.ReportMetric(float64(peak>>20), "peak-RSS-MiB")
				b.ReportMetric(float64(slowest.Milliseconds()), "slowest-healthz-ms")
				b.ReportMetric(float64(timeouts), "healthz-timeouts")
			}
		})
	}
}
