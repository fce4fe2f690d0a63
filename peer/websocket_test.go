package peer

import (
	"bufio"
	"context"
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
