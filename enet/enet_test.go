package enet

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// exchange sends reliable, unreliable, unsequenced and fragmented packets
// from a to b and checks what b receives.
func exchange(t *testing.T, a, b *Peer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	big := payload(150_000, 3)
	for i := range 50 {
		if err := a.Send(1, []byte(fmt.Sprintf("reliable %d", i)), Reliable); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Send(2, big, Reliable); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(0, []byte("unreliable"), 0); err != nil {
		t.Fatal(err)
	}
	next := 0
	gotBig := false
	for next < 50 || !gotBig {
		pk, err := b.Receive(ctx)
		if err != nil {
			t.Fatalf("receive: %v (reliable %d, big %v)", err, next, gotBig)
		}
		switch pk.Channel {
		case 1:
			if want := fmt.Sprintf("reliable %d", next); string(pk.Data) != want {
				t.Fatalf("got %q, want %q", pk.Data, want)
			}
			next++
		case 2:
			if !bytes.Equal(pk.Data, big) {
				t.Fatalf("big packet of %d bytes differs", len(pk.Data))
			}
			gotBig = true
		}
	}
}

func TestGoToGo(t *testing.T) {
	h, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan *Peer, 1)
	go func() {
		p, err := h.Accept(ctx)
		if err == nil {
			accepted <- p
		}
	}()
	c, err := Dial(ctx, h.Addr().String(), Options{Channels: 6})
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s.Channels() != 6 {
		t.Fatalf("server side has %d channels", s.Channels())
	}
	exchange(t, c, s)
	exchange(t, s, c)
	if err := c.Disconnect(ctx, 42); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the server side never saw the disconnect")
	}
}
