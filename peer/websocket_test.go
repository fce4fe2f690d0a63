package peer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A client may send its first frames together with the upgrade request,
// before it has seen the 101: none of them may be lost when the accepted
// connection gets its own buffers.
func TestAcceptKeepsFramesSentWithTheHandshake(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, AcceptOptions{})
		if err != nil {
			got <- "accept: " + err.Error()
			return
		}
		defer c.CloseNow()
		var msgs []string
		for range 2 {
			b, err := ReadMessage(context.Background(), c)
			if err != nil {
				got <- "read: " + err.Error()
				return
			}
			msgs = append(msgs, string(b))
		}
		got <- strings.Join(msgs, " ")
	}))
	defer srv.Close()

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	frame := func(payload string) []byte {
		mask := []byte{1, 2, 3, 4}
		b := []byte{0x81, 0x80 | byte(len(payload))}
		b = append(b, mask...)
		for i := range len(payload) {
			b = append(b, payload[i]^mask[i%4])
		}
		return b
	}
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	all := append([]byte(req), frame(`["requestMetadata"]`)...)
	all = append(all, frame(`["requestRefresh"]`)...)
	if _, err := conn.Write(all); err != nil { // one write: the frames arrive with the request
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	select {
	case s := <-got:
		if s != `["requestMetadata"] ["requestRefresh"]` {
			t.Fatalf("server read %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("frames sent with the handshake were lost")
	}
	io.Copy(io.Discard, resp.Body)
}

// Messages of every size around the write buffer's reach the peer intact
// and in order, while pings (control frames written by the transport
// itself) go out between them.
func TestAcceptedConnWritesFramesWhole(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 500, 505, 506, 507, 508, 509, 510, 511, 512, 513, 1024, 4096, 65535, 65536, 300 << 10}
	payload := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
		return b
	}
	srvErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, AcceptOptions{})
		if err != nil {
			srvErr <- err
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		go func() { // the client reads, so pings are answered
			for range 20 {
				if c.(Pinger).Ping(ctx) != nil {
					return
				}
			}
		}()
		for round := range 3 {
			for _, n := range sizes {
				if err := c.Write(ctx, payload(n)); err != nil {
					srvErr <- fmt.Errorf("round %d, %d bytes: %w", round, n, err)
					return
				}
			}
		}
		srvErr <- nil
		ReadMessage(ctx, c) // until the client closes
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for round := range 3 {
		for _, n := range sizes {
			b, err := ReadMessage(ctx, c)
			if err != nil {
				t.Fatalf("round %d, %d bytes: %v", round, n, err)
			}
			if !bytes.Equal(b, payload(n)) {
				t.Fatalf("round %d: got %d bytes, want %d intact", round, len(b), n)
			}
		}
	}
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
}
