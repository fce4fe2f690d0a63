package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

type report struct {
	Clients        int     `json:"clients"`
	Seconds        float64 `json:"seconds"`
	Sent           int64   `json:"sent"`
	Delivered      int64   `json:"delivered"`
	DeliveredPerS  float64 `json:"delivered_per_second"`
	LatencySamples int     `json:"latency_samples"`
	P50ms          float64 `json:"p50_ms"`
	P99ms          float64 `json:"p99_ms"`
	MaxMs          float64 `json:"max_ms"`
	Errors         int64   `json:"errors"`
}

func main() {
	url := flag.String("url", "ws://127.0.0.1:8080/ws", "node WebSocket URL")
	clients := flag.Int("clients", 200, "number of clients")
	rate := flag.Float64("rate", 20, "updates per second per client; 0 makes pure observers that own nothing")
	warmup := flag.Duration("warmup", 2*time.Second, "time before measuring")
	duration := flag.Duration("duration", 10*time.Second, "measured window")
	observers := flag.Int("observers", 10, "clients that decode every record to measure latency")
	idle := flag.Bool("idle", false, "connect and stay idle until stdin closes or a signal arrives")
	token := flag.String("token", "", "a token presented to a node with authentication on (Authorization: Bearer); it must grant the prefix \"load\"")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *token != "" {
		dialOpts = &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + *token}}}
	}
	if err := run(ctx, *url, *clients, *rate, *warmup, *duration, *observers, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "solipsism-load:", err)
		os.Exit(1)
	}
}

// dialOpts is how every client dials (nil: defaults).
var dialOpts *websocket.DialOptions

type stats struct {
	measuring atomic.Bool
	sent      atomic.Int64
	delivered atomic.Int64
	errors    atomic.Int64
	mu        sync.Mutex
	latencies []time.Duration
}

func run(ctx context.Context, url string, n int, rate float64, warmup, duration time.Duration, observers int, idle bool) error {
	var st stats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, 0, n)
	for i := 0; i < n; i++ {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		c, _, err := websocket.Dial(dctx, url, dialOpts)
		dcancel()
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
		c.SetReadLimit(64 << 20)
		conns = append(conns, c)
		// Each client starts at once, as a real one does: it answers the
		// node's handshake while the others are still connecting.
		cl := &client{id: fmt.Sprintf("load-%08d-%08d", os.Getpid()%100000000, i), obj: fmt.Sprintf("obj-%08d-%08d", os.Getpid()%100000000, i),
			c: c, st: &st, observer: i < observers, idle: idle || rate <= 0}
		cl.ownKey = []byte(`"id":"` + cl.obj + `"`)
		wg.Add(1)
		go func() { defer wg.Done(); cl.run(ctx, rate) }()
	}
	if idle {
		fmt.Println("connected")
		buf := make([]byte, 1)
		go func() { os.Stdin.Read(buf); cancel() }()
		<-ctx.Done()
	} else {
		select {
		case <-time.After(warmup):
		case <-ctx.Done():
		}
		start := time.Now()
		st.measuring.Store(true)
		fmt.Println("measuring")
		select {
		case <-time.After(duration):
		case <-ctx.Done():
		}
		st.measuring.Store(false)
		fmt.Println("measured")
		secs := time.Since(start).Seconds()
		cancel()
		st.mu.Lock()
		lat := st.latencies
		st.mu.Unlock()
		slices.Sort(lat)
		pct := func(p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return float64(lat[int(p*float64(len(lat)-1))]) / 1e6
		}
		r := report{Clients: n, Seconds: secs, Sent: st.sent.Load(), Delivered: st.delivered.Load(),
			DeliveredPerS: float64(st.delivered.Load()) / secs, LatencySamples: len(lat),
			P50ms: pct(0.5), P99ms: pct(0.99), MaxMs: pct(1), Errors: st.errors.Load()}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	for _, c := range conns {
		c.CloseNow()
	}
	wg.Wait()
	return nil
}

type client struct {
	id, obj  string
	c        *websocket.Conn
	st       *stats
	observer bool
	idle     bool
	ownKey   []byte // `"id":"<obj>"`, to tell the client's own records
	wmu      sync.Mutex
	ready    atomic.Bool
}

func (cl *client) send(ctx context.Context, b []byte) {
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	if err := cl.c.Write(ctx, websocket.MessageText, b); err != nil && ctx.Err() == nil {
		cl.st.errors.Add(1)
	}
}

func (cl *client) add(t int64) []byte {
	return fmt.Appendf(nil, `["worldChange",{"timestamp":%d,"changes":[{"type":"add","id":"%s","owner":"%s","properties":{"position":[0,0,0],"t":%d}}]}]`,
		time.Now().UnixMilli(), cl.obj, cl.id, t)
}

func (cl *client) run(ctx context.Context, rate float64) {
	go cl.read(ctx)
	if cl.idle {
		return
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	i := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !cl.ready.Load() {
			continue
		}
		i++
		now := time.Now()
		msg := fmt.Appendf(nil, `["worldChange",{"timestamp":%d,"changes":[{"type":"update","id":"%s","owner":"%s","properties":{"position":[%d,1,2],"t":%d}}]}]`,
			now.UnixMilli(), cl.obj, cl.id, i, now.UnixNano())
		cl.send(ctx, msg)
		if cl.st.measuring.Load() {
			cl.st.sent.Add(1)
		}
	}
}

var typeKey = []byte(`{"type":"`)

func (cl *client) read(ctx context.Context) {
	for {
		_, b, err := cl.c.Read(ctx)
		if err != nil {
			return
		}
		switch {
		case bytes.HasPrefix(b, []byte(`["worldChange"`)):
			if cl.st.measuring.Load() {
				// A relay that echoes a client's own record does not
				// deliver it.
				n := bytes.Count(b, typeKey) - bytes.Count(b, cl.ownKey)
				cl.st.delivered.Add(int64(n))
				if cl.observer {
					cl.observe(b)
				}
			}
		case bytes.HasPrefix(b, []byte(`["requestMetadata"`)):
			cl.send(ctx, fmt.Appendf(nil, `["metadataChange",{"identifier":"%s","identifierChain":["%s"]}]`, cl.id, cl.id))
		case bytes.HasPrefix(b, []byte(`["requestRefresh"`)):
			if !cl.idle {
				cl.send(ctx, cl.add(time.Now().UnixNano()))
				cl.ready.Store(true)
			}
		}
	}
}

func (cl *client) observe(b []byte) {
	now := time.Now().UnixNano()
	var msg []json.RawMessage
	if json.Unmarshal(b, &msg) != nil || len(msg) != 2 {
		cl.st.errors.Add(1)
		return
	}
	var wc struct {
		Changes []struct {
			ID         string `json:"id"`
			Properties struct {
				T int64 `json:"t"`
			} `json:"properties"`
		} `json:"changes"`
	}
	if json.Unmarshal(msg[1], &wc) != nil {
		cl.st.errors.Add(1)
		return
	}
	lat := make([]time.Duration, 0, len(wc.Changes))
	for _, c := range wc.Changes {
		if c.Properties.T > 0 && c.ID != cl.obj {
			lat = append(lat, time.Duration(now-c.Properties.T))
		}
	}
	cl.st.mu.Lock()
	cl.st.latencies = append(cl.st.latencies, lat...)
	cl.st.mu.Unlock()
}
