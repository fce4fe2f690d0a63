package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
)

// recorder is a Handler that remembers what it was told.
type recorder struct {
	mu       sync.Mutex
	changes  []WorldChange
	refresh  int
	metadata []Metadata
	closed   chan error
}

func newRecorder() *recorder { return &recorder{closed: make(chan error, 1)} }

func (r *recorder) HandleWorldChange(l *Link, wc WorldChange) {
	r.mu.Lock()
	r.changes = append(r.changes, wc)
	r.mu.Unlock()
}
func (r *recorder) HandleRequestRefresh(l *Link) { r.mu.Lock(); r.refresh++; r.mu.Unlock() }
func (r *recorder) HandleMetadata(l *Link, md Metadata) {
	r.mu.Lock()
	r.metadata = append(r.metadata, md)
	r.mu.Unlock()
}
func (r *recorder) LocalMetadata(l *Link) Metadata {
	return Metadata{Identifier: "server-AAAAAAAA-AAAAAAAA", IdentifierChain: []string{"server-AAAAAAAA-AAAAAAAA"}}
}
func (r *recorder) HandleClose(l *Link, err error) { r.closed <- err }

// startLink runs a link over a pipe and returns the far end.
func startLink(t *testing.T, opts LinkOptions) (*Link, *recorder, Conn) {
	t.Helper()
	a, b := Pipe()
	h := newRecorder()
	l := NewLink(a, h, opts)
	go l.Run(context.Background())
	t.Cleanup(func() { l.Close(StatusNormal, "test done"); b.Close(StatusNormal, "") })
	return l, h, b
}

func readMsg(t *testing.T, c Conn) Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := ReadMessage(ctx, c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	m, err := DecodeMessage(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

func write(t *testing.T, c Conn, s string) {
	t.Helper()
	if err := c.Write(context.Background(), []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func update(id string, i int) *Record {
	return NewRecord(gameworld.Change{Type: gameworld.Update, ID: id, Owner: "w",
		Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"i": json.RawMessage(fmt.Sprint(i))})}, slotOf(id))
}

func TestLinkCoalescesWithinTick(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: 100 * time.Millisecond})
	l.Offer([]*Record{rec(gameworld.Add, "a"), rec(gameworld.Add, "b")}, func(int) Verdict { return Echo }, nil, true)
	// Prime lastFlush so the next batch waits a whole tick.
	l.Offer([]*Record{update("a", 0)}, sendAll, nil, true)
	readMsg(t, far)
	for i := 1; i <= 50; i++ {
		l.Offer([]*Record{update("a", i), update("b", i)}, sendAll, nil, true)
	}
	m := readMsg(t, far)
	var lim Limits
	wc, err := lim.DecodeWorldChange(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(wc.Changes) != 2 || string(wc.Changes[0].Properties.Value("i")) != "50" || string(wc.Changes[1].Properties.Value("i")) != "50" {
		t.Fatalf("got %d changes: %+v", len(wc.Changes), wc.Changes)
	}
	if wc.Timestamp < 1e12 {
		t.Fatalf("timestamp %d is not in milliseconds", wc.Timestamp)
	}
}

func TestLinkScalesInterval(t *testing.T) {
	tests := []struct {
		name string
		tick time.Duration
		msgs []string
		want time.Duration
	}{
		{"less once", 50 * time.Millisecond, []string{TypeRequestLessData}, 60 * time.Millisecond},
		{"less then more", 50 * time.Millisecond, []string{TypeRequestLessData, TypeRequestMoreData}, 50 * time.Millisecond},
		{"more is bounded below", 50 * time.Millisecond, []string{TypeRequestMoreData, TypeRequestMoreData, TypeRequestMoreData, TypeRequestMoreData, TypeRequestMoreData}, 25 * time.Millisecond},
		{"less is bounded above", 50 * time.Millisecond, repeat(TypeRequestLessData, 100), time.Second},
		{"less from immediate", Immediate, []string{TypeRequestLessData}, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, h, far := startLink(t, LinkOptions{Tick: tt.tick})
			for _, m := range tt.msgs {
				write(t, far, `["`+m+`"]`)
			}
			write(t, far, `["requestRefresh"]`) // a marker: handled after the others
			deadline := time.Now().Add(5 * time.Second)
			for {
				h.mu.Lock()
				done := h.refresh == 1
				h.mu.Unlock()
				if done {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("marker not handled")
				}
				time.Sleep(time.Millisecond)
			}
			if got := l.Interval(); got != tt.want {
				t.Fatalf("interval = %s, want %s", got, tt.want)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestLinkAnswersInPeerDialect(t *testing.T) {
	l, h, far := startLink(t, LinkOptions{Tick: Immediate})
	write(t, far, `["requestMetadata"]`)
	if m := readMsg(t, far); m.Type != TypeMetadataChange {
		t.Fatalf("default answer is %q, want metadataChange (what 2016 peers understand)", m.Type)
	}
	write(t, far, `["metadata",{"identifier":"client-BBBBBBBB-BBBBBBBB"}]`)
	write(t, far, `["requestMetadata",null]`)
	if m := readMsg(t, far); m.Type != TypeMetadata {
		t.Fatalf("answer after the peer spoke 'metadata' is %q", m.Type)
	}
	if l.Dialect() != TypeMetadata {
		t.Fatal("dialect not remembered")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.metadata) != 1 || h.metadata[0].IdentifierChain[0] != "client-BBBBBBBB-BBBBBBBB" {
		t.Fatalf("metadata = %+v", h.metadata)
	}
}

func TestLinkIgnoresUnknownTypes(t *testing.T) {
	l, h, far := startLink(t, LinkOptions{Tick: Immediate})
	write(t, far, `["fromTheFuture",{"x":1}]`)
	write(t, far, `["requestRefresh"]`)
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().MessagesIn[KindRequestRefresh].Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("link stopped reading after an unknown type")
		}
		time.Sleep(time.Millisecond)
	}
	if l.Stats().MessagesIn[KindUnknown].Load() != 1 {
		t.Fatal("unknown message not counted")
	}
	if l.Err() != nil {
		t.Fatalf("link closed: %v", l.Err())
	}
	_ = h
}

func TestLinkSplitsLargeBatches(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: Immediate, MaxFrameBytes: 1024})
	big := strings.Repeat("x", 200)
	var recs []*Record
	for i := 0; i < 40; i++ {
		recs = append(recs, NewRecord(gameworld.Change{Type: gameworld.Add, ID: fmt.Sprint("o", i), Owner: "w",
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"s": json.RawMessage(`"` + big + `"`)})}, uint32(i)))
	}
	l.Offer(recs, sendAll, nil, false)
	l.MarkRefreshed()
	var lim Limits
	total, frames := 0, 0
	for refreshed := false; !refreshed; {
		m := readMsg(t, far)
		wc, err := lim.DecodeWorldChange(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		frames++
		total += len(wc.Changes)
		refreshed = wc.Refreshed
		// The marker goes with the frame that completes the answer, or
		// (if the writer sent every record before the answer was marked
		// complete) in an empty frame right after.
		if refreshed && total != 40 || total == 40 && len(wc.Changes) == 0 && !refreshed {
			t.Fatalf("refreshed marker %v on frame %d (total %d)", refreshed, frames, total)
		}
	}
	if frames < 8 {
		t.Fatalf("40 records of 200+ bytes in %d frames of ≤1 KiB", frames)
	}
}

func TestLinkClosesStalledPeer(t *testing.T) {
	l, h, _ := startLink(t, LinkOptions{Tick: Immediate, StallTimeout: 200 * time.Millisecond})
	// The far end never reads: the pipe's buffer fills and a write blocks.
	for i := 0; i < 200; i++ {
		l.Offer([]*Record{NewRecord(gameworld.Change{Type: gameworld.Add, ID: fmt.Sprint("o", i), Owner: "w"}, uint32(i))}, sendAll, nil, true)
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-h.closed:
		ce, ok := err.(*CloseError)
		if !ok || ce.Code != StatusStalled {
			t.Fatalf("closed with %v, want StatusStalled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stalled link not closed")
	}
	if l.Queued() > 200 {
		t.Fatal("queue grew past the number of objects")
	}
}

// TestLinkStallCountsFromTheWrite: the stall timer, armed by a link's
// first write and not reset around each write, closes a link only when
// one write has been blocked for the stall timeout: a peer that reads
// slowly, each write waiting for it a while, keeps its link however long
// ago the timer was armed; one that stops reading is cut off, no sooner
// than the stall timeout after it stopped.
func TestLinkStallCountsFromTheWrite(t *testing.T) {
	const stall = 300 * time.Millisecond
	l, h, far := startLink(t, LinkOptions{Tick: Immediate, StallTimeout: stall})
	var reading sync.WaitGroup
	var lastRead atomic.Int64 // Unix nanoseconds
	pace := make(chan time.Duration, 1)
	pace <- 0
	reading.Add(1)
	go func() {
		defer reading.Done()
		gap := time.Duration(0)
		for {
			select {
			case g, ok := <-pace:
				if !ok {
					return // stop reading
				}
				gap = g
			default:
			}
			if _, err := ReadMessage(context.Background(), far); err != nil {
				return
			}
			lastRead.Store(time.Now().UnixNano())
			time.Sleep(gap)
		}
	}()
	next := func() { l.Offer([]*Record{update("a", int(time.Now().UnixNano()%1000))}, sendAll, nil, true) }
	offer := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			next()
			select {
			case err := <-h.closed:
				t.Fatalf("link closed while the peer reads: %v", err)
			default:
			}
		}
	}
	l.Offer([]*Record{rec(gameworld.Add, "a")}, sendAll, nil, true)
	offer(stall) // the peer reads at once
	pace <- stall / 3
	offer(4 * stall) // each write waits up to a third of the timeout
	close(pace)      // (after the read under way and its pause)
	go func() {
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			next()
		}
	}()
	select {
	case err := <-h.closed:
		if ce, ok := err.(*CloseError); !ok || ce.Code != StatusStalled {
			t.Fatalf("closed with %v, want StatusStalled", err)
		}
		// The write that blocks began once the last read freed room;
		// (20 ms: the time between freeing it and noting the read.)
		if d := time.Since(time.Unix(0, lastRead.Load())); d < stall-20*time.Millisecond {
			t.Fatalf("closed %v after the peer's last read, before the stall timeout (%v)", d, stall)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stalled link not closed")
	}
	reading.Wait()
}

func TestLinkMetadataTimeout(t *testing.T) {
	_, h, _ := startLink(t, LinkOptions{MetadataTimeout: 50 * time.Millisecond})
	select {
	case err := <-h.closed:
		if ce, ok := err.(*CloseError); !ok || ce.Code != StatusNoMetadata {
			t.Fatalf("closed with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("link without metadata not closed")
	}
}
