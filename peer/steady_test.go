package peer

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSteady(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		gaps []int64 // between messages, in ms; the first message comes at 1 s
		want []bool
	}{
		{"a handshake", []int64{0, 1, 1}, []bool{false, false, false}},
		{"a stream", []int64{0, 50, 50, 50, 50, 50, 50, 50, 50, 50}, []bool{false, false, false, false, false, false, false, false, true, true}},
		{"a gap ends a run", []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 300, 1}, []bool{false, false, false, false, false, false, false, false, true, false, false}},
		{"just within the gap", []int64{0, 250, 250, 250, 250, 250, 250, 250, 250}, []bool{false, false, false, false, false, false, false, false, true}},
		{"occasional messages", []int64{0, 251, 251, 251, 251, 251, 251, 251, 251, 251}, []bool{false, false, false, false, false, false, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Link
			now := int64(time.Second)
			for i, g := range tc.gaps {
				now += g * ms
				if got := l.steady(now); got != tc.want[i] {
					t.Fatalf("message %d: steady %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}

// dialServed serves a link with h and opts over a real WebSocket on
// 127.0.0.1 and dials it; it returns the far end and a context that ends
// with the test (20 s at most), which closes both.
func dialServed(t *testing.T, h Handler, opts LinkOptions) (Conn, context.Context) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, AcceptOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		NewLink(c, h, opts).Run(context.Background())
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, ctx
}

// goroutineID returns the calling goroutine's number, from its stack's
// first line ("goroutine N [running]:").
func goroutineID() int {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// onGoroutines is a Handler that notes, for each worldChange, the value of
// its one change's property "i" and the goroutine that handled it.
type onGoroutines struct {
	*recorder
	mu  sync.Mutex
	is  []string
	gos []int
}

func (h *onGoroutines) HandleWorldChange(l *Link, wc WorldChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range wc.Changes {
		h.is = append(h.is, string(c.Properties.Value("i")))
		h.gos = append(h.gos, goroutineID())
	}
}

// TestSteadyLinkHandlesOnItsReader: over a real WebSocket, a peer that
// streams changes has them handled on the link's reading goroutine once
// it is steady, each message on a goroutine of its own before that and
// again after a pause; every change is handled, in the order sent.
func TestSteadyLinkHandlesOnItsReader(t *testing.T) {
	h := &onGoroutines{recorder: newRecorder()}
	c, ctx := dialServed(t, h, LinkOptions{}) // no Workers: a goroutine per message handed over
	send := func(i int) {
		msg := fmt.Sprintf(`["worldChange",{"timestamp":1,"changes":[{"type":"update","id":"w-o","owner":"w","properties":{"i":%d}}]}]`, i)
		if err := c.Write(ctx, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	const burst = 30
	for i := range burst {
		send(i)
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(2 * steadyGap)
	send(burst)
	var is []string
	var gos []int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h.mu.Lock()
		is, gos = append([]string(nil), h.is...), append([]int(nil), h.gos...)
		h.mu.Unlock()
		if len(is) == burst+1 || time.Now().After(deadline) {
			break
		}
	}
	if len(is) != burst+1 {
		t.Fatalf("handled %d changes, want %d", len(is), burst+1)
	}
	for i, v := range is {
		if v != strconv.Itoa(i) {
			t.Fatalf("change %d handled as %s: %v", i, v, is)
		}
	}
	// A steady run can only start from the ninth message; a slow machine
	// may start it later (a gap of more than steadyGap between two
	// messages), but it starts.
	first := -1
	for i := steadyRun; i < burst; i++ {
		if gos[i] == gos[i-1] {
			first = i - 1
			break
		}
	}
	if first < 0 {
		t.Fatalf("no two messages of the burst were handled on the same goroutine: %v", gos)
	}
	seen := map[int]bool{}
	for i := range first {
		if seen[gos[i]] {
			t.Fatalf("message %d handled on a goroutine that handled another before the link was steady: %v", i, gos)
		}
		seen[gos[i]] = true
	}
	if seen[gos[burst]] || gos[burst] == gos[burst-1] {
		t.Fatalf("the message after a pause was handled on the reading goroutine: %v", gos)
	}
}
