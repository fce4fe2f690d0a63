package wiretest

import (
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// LossyUDP relays datagrams between one client and a server: drops 10%,
// duplicates 5%, reorders within 3 (a datagram held back goes after at
// most two later ones, or after 20 ms: as on a real network, never until
// the direction happens to carry something else, which in a quiet
// direction took seconds and swelled both sides' round-trip estimates
// until one timed the other out). It returns its address.
func LossyUDP(t testing.TB, server string, seed uint64) string {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := net.ResolveUDPAddr("udp", server)
	back, err := net.DialUDP("udp", nil, sa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close(); back.Close() })
	var mu sync.Mutex
	var client *net.UDPAddr
	r := rand.New(rand.NewPCG(seed, 9))
	pump := func(read func([]byte) (int, error), send func([]byte)) {
		var hmu sync.Mutex // held, and the sends that flush it
		var held [][]byte
		flush := func() {
			for _, h := range held {
				send(h)
			}
			held = held[:0]
		}
		buf := make([]byte, 8192)
		for {
			n, err := read(buf)
			if err != nil {
				return
			}
			p := append([]byte(nil), buf[:n]...)
			mu.Lock()
			x := r.Float64()
			mu.Unlock()
			hmu.Lock()
			switch {
			case x < 0.10:
				hmu.Unlock()
				continue
			case x < 0.15:
				send(p)
			case x < 0.30 && len(held) < 2:
				held = append(held, p)
				if len(held) == 1 {
					time.AfterFunc(20*time.Millisecond, func() { hmu.Lock(); flush(); hmu.Unlock() })
				}
				hmu.Unlock()
				continue
			}
			send(p)
			flush()
			hmu.Unlock()
		}
	}
	go pump(func(b []byte) (int, error) {
		n, a, err := front.ReadFromUDP(b)
		if err == nil {
			mu.Lock()
			client = a
			mu.Unlock()
		}
		return n, err
	}, func(b []byte) { back.Write(b) })
	go pump(back.Read, func(b []byte) {
		mu.Lock()
		c := client
		mu.Unlock()
		if c != nil {
			front.WriteToUDP(b, c)
		}
	})
	return front.LocalAddr().String()
}
