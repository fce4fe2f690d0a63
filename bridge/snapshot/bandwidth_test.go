package snapshot

import (
	"fmt"
	"math"
	"net/netip"
	"testing"

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
