package snapshot

import (
	"encoding/hex"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// TestWorkedExample builds the packet docs/bridges.md walks through: tick
// 7, one transform ghost moving since tick 5 and 6, both acknowledged.
func TestWorkedExample(t *testing.T) {
	s := &Server{types: []GhostType{GenericType, TransformType}, objects: map[string]*ghost{}, byName: map[string]int{"generic": 0, "transform": 1}}
	for _, ty := range s.types {
		s.hashes = append(s.hashes, ty.Hash())
	}
	s.clock = func() uint32 { return 1000 + 16*s.tick }
	c := &conn{despawns: map[uint32]bool{}, loaded: 2, lastCmd: 6, cmdMask: 1, cmdTime: 500}
	move := func(tick uint32, x float64) {
		s.tick = tick
		s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: "ball"}, After: transform(x, 0, 0)})
	}
	var w Writer
	move(5, 1.000)
	s.snapshotLocked(c, &w)
	s.ackLocked(c, 5, 0)
	move(6, 1.010)
	w.Reset()
	s.snapshotLocked(c, &w)
	s.ackLocked(c, 6, 1)
	move(7, 1.020)
	w.Reset()
	s.snapshotLocked(c, &w)
	got := hex.EncodeToString(w.Bytes())
	t.Logf("%d bits, %d bytes: %s", w.Bits(), len(w.Bytes()), got)
	if got != workedPacket {
		t.Errorf("the packet changed; update docs/bridges.md:\n got %s\nwant %s", got, workedPacket)
	}
}

// workedPacket is the packet of docs/bridges.md.
const workedPacket = "0258040000f4010000000000000207000000060000000100000000000200000000000100000092c8906a0000"
