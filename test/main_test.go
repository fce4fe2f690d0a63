package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestMain doubles as the bare relay that benchmarks compare the node with:
// run with SOLIPSISM_BARE_RELAY set, the test binary serves it instead of
// running tests, so that it is a process of its own like the node.
func TestMain(m *testing.M) {
	if os.Getenv("SOLIPSISM_BARE_RELAY") != "" {
		if err := runBareRelay(); err != nil {
			fmt.Fprintln(os.Stderr, "bare relay:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if csharpDir != "" {
		os.RemoveAll(csharpDir) // (the C# build, shared by the tests)
	}
	os.Exit(code)
}

// runBareRelay is the least a relay can do: every change record received
// during a tick goes, in one shared message encoded once, to every
// connection. No world, no ownership, no per-connection queue, no echo
// filter, no coalescing. It listens on 127.0.0.1:0, prints its address, and
// stops when its standard input closes.
func runBareRelay() error {
	tick := 50 * time.Millisecond
	if s := os.Getenv("SOLIPSISM_BARE_RELAY_TICK"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		tick = time.Duration(ms) * time.Millisecond
	}
	var (
		mu    sync.Mutex
		conns = map[*websocket.Conn]bool{}
		batch []json.RawMessage
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.SetReadLimit(1 << 20)
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		go func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.CloseNow()
			}()
			ctx := context.Background()
			// The load tool starts sending once asked for a refresh.
			if c.Write(ctx, websocket.MessageText, []byte(`["requestRefresh",null]`)) != nil {
				return
			}
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				var msg struct {
					Changes []json.RawMessage `json:"changes"`
				}
				var env []json.RawMessage
				if json.Unmarshal(b, &env) != nil || len(env) != 2 || json.Unmarshal(env[1], &msg) != nil {
					continue
				}
				mu.Lock()
				batch = append(batch, msg.Changes...)
				mu.Unlock()
			}
		}()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ln, handler)
	fmt.Println(ln.Addr().String())
	go func() {
		var buf []byte
		var targets []*websocket.Conn
		for range time.Tick(tick) {
			mu.Lock()
			recs := batch
			batch = nil
			targets = targets[:0]
			for c := range conns {
				targets = append(targets, c)
			}
			mu.Unlock()
			if len(recs) == 0 {
				continue
			}
			buf = fmt.Appendf(buf[:0], `["worldChange",{"timestamp":%d,"changes":[`, time.Now().UnixMilli())
			for i, r := range recs {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, r...)
			}
			buf = append(buf, "]}]"...)
			for _, c := range targets {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c.Write(ctx, websocket.MessageText, buf)
				cancel()
			}
		}
	}()
	b := make([]byte, 1)
	os.Stdin.Read(b)
	return nil
}
