package snapshot

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// TestMaxKbps: under Options.MaxKbps every packet holds at most its share
// of the bound, the most urgent ghosts first, and a client that
// acknowledges what it gets still comes to hold every object as it is.
func TestMaxKbps(t *testing.T) {
	for _, kbps := range []int{0, 64, 256} {
		t.Run(fmt.Sprint(kbps, "kbps"), func(t *testing.T) {
			s := clockedServer()
			s.opts = Options{Rate: 60, MaxKbps: kbps}
			c := &conn{despawns: map[uint32]bool{}, loaded: 2}
			s.clients = map[netip.AddrPort]*conn{netip.MustParseAddrPort("127.0.0.1:1"): c}
			w := newWorld([]GhostType{GenericType, TransformType})
			w.loaded, w.hashes = []int{0, 1}, []uint32{GenericType.Hash(), TransformType.Hash()}
			limit := MaxPacket
			if kbps > 0 {
				limit = kbps * 1000 / 60 / 8
			}
			const n = 300
			move := func(tick uint32, moving int) {
				s.tick = tick
				for i := range moving {
					a := float64(tick)*0.02 + float64(i)
					s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("o%03d", i)}, After: transform(math.Cos(a), math.Sin(a), a)})
				}
			}
			largest := 0
			step := func(tick uint32) {
				s.tick = tick
				var wr Writer
				s.snapshotLocked(c, &wr)
				largest = max(largest, len(wr.Bytes()))
				if len(wr.Bytes()) > limit {
					t.Fatalf("tick %d: a packet of %d bytes, over %d", tick, len(wr.Bytes()), limit)
				}
				if err := w.apply(wr.Bytes()); err != nil {
					t.Fatal(err)
				}
				s.ackLocked(c, tick, 0)
			}
			tick := uint32(1)
			for ; tick <= 120; tick++ {
				move(tick, n) // all moving: more than any packet holds
				step(tick)
			}
			for ; tick <= 400; tick++ { // then still: everything arrives
				step(tick)
			}
			if err := sameWorld(serverWorld(s), w.Objects()); err != nil {
				t.Fatalf("after the objects stopped: %v", err)
			}
			t.Logf("largest packet %d bytes (limit %d)", largest, limit)
		})
	}
}

// serverWorld returns the objects a server holds as the node would.
func serverWorld(s *Server) map[string]gameworld.Object {
	out := map[string]gameworld.Object{}
	for id, g := range s.objects {
		out[id] = gameworld.Object{ID: id, Properties: s.types[g.typ].properties(g.vals)}
	}
	return out
}

// TestMaxKbpsOverUDP: the bound holds on the wire. A client reaches the
// server through a UDP relay that notes the largest datagram the server
// sends; 300 objects all moving fill every packet, then stop, and the
// client comes to hold the node's world.
func TestMaxKbpsOverUDP(t *testing.T) {
	for _, kbps := range []int{64, 256} {
		t.Run(fmt.Sprint(kbps, "kbps"), func(t *testing.T) {
			p := startPlace(t, Options{Rate: 60, MaxKbps: kbps})
			addr, largest := udpRelay(t, p.srv.Addr().String())
			c := dial(t, addr, ClientOptions{})
			move := func(tick int) {
				var ch []gameworld.Change
				for i := range 300 {
					a := float64(tick)*0.02 + float64(i)
					ch = append(ch, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o%03d", i), Properties: transform(math.Cos(a), math.Sin(a), a)})
				}
				if _, err := p.node.Apply(ch); err != nil {
					t.Fatal(err)
				}
			}
			for tick := range 60 { // a second of everything moving
				move(tick)
				time.Sleep(time.Second / 60)
			}
			waitFor(t, "the client to hold the node's world", 30*time.Second, func() bool {
				return sameWorld(worldOf(p.node), c.Objects()) == nil
			})
			if limit := kbps * 1000 / 60 / 8; largest() > limit || largest() < limit/2 {
				t.Fatalf("the largest snapshot was %d bytes; the bound's share is %d", largest(), limit)
			}
		})
	}
}

// udpRelay forwards datagrams between one client and server, and reports
// the largest the server sent.
func udpRelay(t *testing.T, server string) (addr string, largest func() int) {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.DialUDP("udp", nil, sa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close(); back.Close() })
	var most atomic.Int64
	var client atomic.Pointer[net.UDPAddr]
	go func() { // client → server
		buf := make([]byte, 2048)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			client.Store(from)
			back.Write(buf[:n])
		}
	}()
	go func() { // server → client
		buf := make([]byte, 2048)
		for {
			n, err := back.Read(buf)
			if err != nil {
				return
			}
			if buf[0] == msgSnapshot && int64(n) > most.Load() {
				most.Store(int64(n))
			}
			if to := client.Load(); to != nil {
				front.WriteToUDP(buf[:n], to)
			}
		}
	}()
	return front.LocalAddr().String(), func() int { return int(most.Load()) }
}
