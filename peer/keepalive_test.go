package peer

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// slowHandler is a recorder whose metadata handler takes hold the first
// time, as a node's does when its lock is busy.
type slowHandler struct {
	*recorder
	hold  time.Duration
	first atomic.Bool
}

func (h *slowHandler) HandleMetadata(l *Link, md Metadata) {
	if !h.first.Swap(true) {
		time.Sleep(h.hold)
	}
	h.recorder.HandleMetadata(l, md)
}

// TestKeepaliveSparesASlowNode: a node that is slow to read a peer (its
// handler busy far longer than the stall timeout) does not cut off the peer
// whose pongs wait behind what it sent meanwhile; a peer that goes silent
// and stops answering is cut off.
func TestKeepaliveSparesASlowNode(t *testing.T) {
	const stall = 300 * time.Millisecond
	h := &slowHandler{recorder: newRecorder(), hold: 6 * stall}
	c, ctx := dialServed(t, h, LinkOptions{StallTimeout: stall, PingInterval: stall / 3})
	// The peer reads (its transport answers pings as it does) and goes on
	// sending while the node's handler holds.
	// (Cancelling a read would close the connection: the reader stops
	// after the message that follows stop.)
	reading := make(chan struct{})
	var stop atomic.Bool
	go func() {
		defer close(reading)
		for !stop.Load() {
			if _, err := ReadMessage(ctx, c); err != nil {
				return
			}
		}
	}()
	md := `["metadata",{"identifier":"client-AAAAAAAA-BBBBBBBB","identifierChain":["client-AAAAAAAA-BBBBBBBB"]}]`
	sent := 0
	for end := time.Now().Add(h.hold + 2*stall); time.Now().Before(end); time.Sleep(stall / 6) {
		if err := c.Write(ctx, []byte(md)); err != nil {
			t.Fatalf("the node cut off a live peer while its handler was busy: %v", err)
		}
		sent++
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.metadata)
		h.mu.Unlock()
		if n == sent {
			break
		}
		select {
		case err := <-h.closed:
			t.Fatalf("the node cut off a live peer while its handler was busy (%d of %d messages handled): %v", n, sent, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages handled", n, sent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Silent and deaf: cut off by the keepalive.
	stop.Store(true)
	if err := c.Write(ctx, []byte(`["requestMetadata"]`)); err != nil {
		t.Fatal(err)
	}
	<-reading
	select {
	case err := <-h.closed:
		var ce *CloseError
		if !errors.As(err, &ce) || ce.Code != StatusGoingAway {
			t.Fatalf("a silent peer closed with %v, want the keepalive's %d", err, StatusGoingAway)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent peer that answers no ping was not cut off")
	}
}
