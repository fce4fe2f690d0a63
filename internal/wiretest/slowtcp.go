package wiretest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// SlowTCP relays TCP connections to server through 127.0.0.1, each
// direction of each connection at most bytesPerSecond: a slow hop, so that
// a burst is still crossing it when what follows happens. It returns its
// address; the relay stops with the test.
func SlowTCP(t testing.TB, server string, bytesPerSecond int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			front, err := ln.Accept()
			if err != nil {
				return
			}
			back, err := net.Dial("tcp", server)
			if err != nil {
				front.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, front, back)
			mu.Unlock()
			go pumpSlow(back, front, bytesPerSecond)
			go pumpSlow(front, back, bytesPerSecond)
		}
	}()
	return ln.Addr().String()
}

// pumpSlow copies src to dst at most bytesPerSecond, and closes both when
// either side ends.
func pumpSlow(dst, src net.Conn, bytesPerSecond int) {
	defer dst.Close()
	defer src.Close()
	const chunk = 4096
	lim := rate.NewLimiter(rate.Limit(bytesPerSecond), chunk)
	buf := make([]byte, chunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r := lim.ReserveN(time.Now(), n)
			time.Sleep(r.Delay())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}
