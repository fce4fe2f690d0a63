package snapshot

import (
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// clockedServer is a server of the built-in types that no socket serves,
// its clock 1000 + 16 ms a tick (60 Hz), for packets built and read in
// place.
func clockedServer() *Server {
	s := &Server{types: []GhostType{GenericType, TransformType}, objects: map[string]*ghost{}, byName: map[string]int{"generic": 0, "transform": 1}}
	for _, ty := range s.types {
		s.hashes = append(s.hashes, ty.Hash())
	}
	s.clock = func() uint32 { return 1000 + 16*s.tick }
	return s
}

// TestWorkedExample builds the packet docs/bridges.md walks through: tick
// 7, one transform ghost moving since tick 5 and 6, both acknowledged.
func TestWorkedExample(t *testing.T) {
	s := clockedServer()
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
const workedPacket = "0258040000f4010000000000000207000000060000000100000000000200000000000100000092c85000"

// TestPacketVectors builds the five packets of docs/bridges.md's "More
// packets" and decodes them as a client: the type list, a generic and a
// transform ghost spawning (a quaternion), a despawn, a move against one
// baseline and one predicted from two (compact groups).
func TestPacketVectors(t *testing.T) {
	s := clockedServer()
	c := &conn{despawns: map[uint32]bool{}}
	s.clients = map[netip.AddrPort]*conn{netip.MustParseAddrPort("127.0.0.1:1"): c}
	var pkts []string
	snap := func(tick uint32) {
		s.tick = tick
		var w Writer
		s.snapshotLocked(c, &w)
		pkts = append(pkts, hex.EncodeToString(w.Bytes()))
		s.ackLocked(c, tick, 0)
	}
	snap(1)
	c.loaded = 2 // (the client's command said it loaded both)
	s.tick = 2
	s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: "note"}, After: gameworld.PropertiesOf(map[string]json.RawMessage{"text": json.RawMessage(`"hi"`)})})
	s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: "ball"}, After: gameworld.PropertiesOf(map[string]json.RawMessage{
		"ghostType": json.RawMessage(`"transform"`), "position": json.RawMessage(`[1,2,3]`), "rotation": json.RawMessage(`[0,0.7071068,0,0.7071068]`)})})
	snap(2)
	s.tick = 3
	s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Remove, ID: "note"}})
	snap(3)
	for i, x := range []string{"1.01", "1.02"} {
		tick := uint32(4 + i)
		s.tick = tick
		s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: "ball"}, After: gameworld.PropertiesOf(map[string]json.RawMessage{
			"ghostType": json.RawMessage(`"transform"`), "position": json.RawMessage(`[` + x + `,2,3]`), "rotation": json.RawMessage(`[0,0.7071068,0,0.7071068]`)})})
		snap(tick)
	}

	doc, err := os.ReadFile("../../docs/bridges.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts {
		if !strings.Contains(strings.NewReplacer(" ", "", "\n", "").Replace(string(doc)), p) {
			t.Errorf("docs/bridges.md lacks packet %d:\n%s", i+1, spaced(p))
		}
	}
	w := newWorld([]GhostType{GenericType, TransformType})
	apply := func(i int) map[string]gameworld.Properties {
		b, _ := hex.DecodeString(pkts[i])
		if err := w.apply(b); err != nil {
			t.Fatalf("packet %d: %v", i+1, err)
		}
		return w.Objects()
	}
	if objs := apply(0); len(objs) != 0 || len(w.loaded) != 2 {
		t.Fatalf("packet 1: %d objects, %d types loaded", len(objs), len(w.loaded))
	}
	objs := apply(1)
	if got := objs["note"].String(); got != `{"text":"hi"}` {
		t.Errorf("note: %s", got)
	}
	if got := objs["ball"].String(); got != `{"ghostType":"transform","position":[1,2,3],"rotation":[0,0.7072135463,0,0.707]}` {
		t.Errorf("ball: %s", got)
	}
	if objs := apply(2); len(objs) != 1 || objs["ball"].IsZero() {
		t.Errorf("after the despawn: %v", objs)
	}
	for i, want := range []string{"1.01", "1.02"} {
		if got := apply(3 + i)["ball"].String(); got != `{"ghostType":"transform","position":[`+want+`,2,3],"rotation":[0,0.7072135463,0,0.707]}` {
			t.Errorf("packet %d: ball %s", 4+i, got)
		}
	}
}

// spaced writes hex as the doc shows it: bytes apart, 32 a line.
func spaced(h string) string {
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(map[bool]byte{true: '\n', false: ' '}[i%64 == 0])
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}
