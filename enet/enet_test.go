package enet

import (
	"context"
	"fmt"
	"net"
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
	receiveAll(t, b, big)
}

// goPair connects a Go client to a Go host on 127.0.0.1 with the given
// channels, and returns both ends and a context that ends with the test.
func goPair(t *testing.T, channels int) (c, s *Peer, ctx context.Context) {
	t.Helper()
	h, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	accepted := make(chan *Peer, 1)
	go func() {
		p, err := h.Accept(ctx)
		if err == nil {
			accepted <- p
		}
	}()
	c, err = Dial(ctx, h.Addr().String(), Options{Channels: channels})
	if err != nil {
		t.Fatal(err)
	}
	return c, <-accepted, ctx
}

func TestGoToGo(t *testing.T) {
	c, s, ctx := goPair(t, 6)
	if s.Channels() != 6 {
		t.Fatalf("server side has %d channels", s.Channels())
	}
	exchange(t, c, s)
	exchange(t, s, c)
	if err := c.LimitBandwidth(1000, 2000); err != nil {
		t.Fatal(err)
	}
	c.ConfigureThrottle(4000, 3, 4)
	deadline := time.Now().Add(5 * time.Second)
	for {
		in, out, iv, acc, dec := s.Limits()
		if in == 1000 && out == 2000 && iv == 4000 && acc == 3 && dec == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("limits %d %d %d %d %d", in, out, iv, acc, dec)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Disconnect(ctx, 42); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the server side never saw the disconnect")
	}
}

// TestNoAmplification: a connect from a source that never answers brings
// back at most what it sent, once, whatever the time.
func TestNoAmplification(t *testing.T) {
	h, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	raw, err := net.DialUDP("udp", nil, h.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cmd := command{kind: cmdConnect, flags: flagAcknowledge, channel: 0xFF, seq: 1, mtu: 1400, windowSize: 65536, channelCount: 6, connectID: 99}
	req := appendCommand(appendHeader(nil, maxPeerID, 0, true, 1), &cmd)
	raw.Write(req)
	got := 0
	buf := make([]byte, 4096)
	for {
		raw.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := raw.Read(buf)
		if err != nil {
			break
		}
		got += n
	}
	if got == 0 || got > len(req) {
		t.Fatalf("a %d-byte connect brought back %d bytes", len(req), got)
	}
}

// TestDisconnectLater: what was sent reliably before DisconnectLater
// reaches the peer, all of it and before the disconnect (a refusal sent
// just before hanging up is read), fragmented packets included.
func TestDisconnectLater(t *testing.T) {
	c, s, ctx := goPair(t, 2)
	const n = 20
	for i := range n {
		if err := s.Send(1, payload(5000+i, byte(i)), Reliable); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.DisconnectLater(ctx, 1003) }()
	for i := range n {
		pk, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("packet %d: %v (the disconnect overtook what was sent before it)", i, err)
		}
		if len(pk.Data) != 5000+i {
			t.Fatalf("packet %d has %d bytes", i, len(pk.Data))
		}
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client never saw the disconnect")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
