package enet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// cPeer builds testdata/peer.c against the system's ENet library, or
// skips the test saying how to get it (CI installs both).
func cPeer(t *testing.T) string {
	t.Helper()
	return wiretest.BuildC(t, "testdata/peer.c", "libenet-dev", "enet")
}

// runC starts the C peer and returns its output lines.
func runC(t *testing.T, bin string, args ...string) (lines chan string, wait func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	cmd := exec.CommandContext(ctx, bin, args...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	lines = make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var once sync.Once
	var werr error
	wait = func() error {
		once.Do(func() { werr = cmd.Wait(); cancel() })
		return werr
	}
	t.Cleanup(func() { cancel(); wait() })
	return lines, wait
}

// serveLikeC does from Go what the C peer does: send the reliable,
// big and unreliable packets, then receive the same from the other side.
func serveLikeC(t *testing.T, p *Peer) {
	t.Helper()
	for i := range 50 {
		p.Send(1, []byte(fmt.Sprintf("reliable %d", i)), Reliable)
	}
	p.Send(2, payload(150000, 3), Reliable)
	for i := range 20 {
		p.Send(0, []byte(fmt.Sprintf("unreliable %d", i)), 0)
	}
	receiveAll(t, p, payload(150000, 3))
}

// receiveAll receives from p until it has the 50 reliable packets of
// channel 1, once and in order, and the big packet of channel 2, intact.
func receiveAll(t *testing.T, p *Peer, big []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	next, gotBig := 0, false
	for next < 50 || !gotBig {
		pk, err := p.Receive(ctx)
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

func expectLine(t *testing.T, lines chan string, prefix string) string {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the C peer ended before %q", prefix)
			}
			t.Logf("C: %s", l)
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-time.After(70 * time.Second):
			t.Fatalf("the C peer never said %q", prefix)
		}
	}
}

// TestCClientGoServer: the reference library connects to our host, both
// exchange reliable, unreliable and fragmented packets on several
// channels, and it disconnects cleanly; directly and through loss.
func TestCClientGoServer(t *testing.T) {
	bin := cPeer(t)
	for _, loss := range []bool{false, true} {
		t.Run(fmt.Sprintf("loss=%v", loss), func(t *testing.T) {
			h, err := Listen("127.0.0.1:0", Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			addr := h.Addr().String()
			if loss {
				addr = wiretest.LossyUDP(t, addr, 1)
			}
			host, port, _ := net.SplitHostPort(addr)
			lines, wait := runC(t, bin, "client", host, port)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := h.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if p.Channels() != 6 {
				t.Errorf("%d channels", p.Channels())
			}
			expectLine(t, lines, "connected")
			serveLikeC(t, p)
			expectLine(t, lines, "received all")
			expectLine(t, lines, "disconnected")
			// Its disconnect arrives, or (if every copy was lost) our pings
			// time it out.
			select {
			case <-p.Done():
			case <-time.After(40 * time.Second):
				t.Fatal("the C client's disconnect never arrived, and it never timed out")
			}
			if err := wait(); err != nil {
				t.Fatalf("the C peer failed: %v", err)
			}
		})
	}
}

// TestGoClientCServer: our client against the reference library's server.
func TestGoClientCServer(t *testing.T) {
	bin := cPeer(t)
	for _, loss := range []bool{false, true} {
		t.Run(fmt.Sprintf("loss=%v", loss), func(t *testing.T) {
			l, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			port := l.LocalAddr().(*net.UDPAddr).Port
			l.Close()
			lines, wait := runC(t, bin, "server", fmt.Sprint(port))
			expectLine(t, lines, "listening")
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			if loss {
				addr = wiretest.LossyUDP(t, addr, 2)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := Dial(ctx, addr, Options{Channels: 6})
			if err != nil {
				t.Fatal(err)
			}
			expectLine(t, lines, "connected")
			serveLikeC(t, p)
			expectLine(t, lines, "received all")
			if err := p.Disconnect(ctx, 9); err != nil {
				t.Fatal(err)
			}
			expectLine(t, lines, "disconnected 9")
			if err := wait(); err != nil {
				t.Fatalf("the C peer failed: %v", err)
			}
		})
	}
}
