package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// TestRelevancy: over real UDP, a client of version 3 that states a
// region and a room holds the ghosts of the objects inside its region
// (within the margin, once held) and of its room, those without a
// position, and its own, and nothing else; an object that leaves goes
// from its view and comes back with its values as they are; a new
// interest takes effect at once; a client without an interest holds
// everything. At the end each client holds what the node holds of its
// interest, value for value.
func TestRelevancy(t *testing.T) {
	p := startPlace(t, Options{InterestMargin: 2})
	put := func(id string, props map[string]any) {
		t.Helper()
		raw := map[string]json.RawMessage{}
		for k, v := range props {
			raw[k], _ = json.Marshal(v)
		}
		typ := gameworld.Update
		if _, ok := p.node.World().Get(id); !ok {
			typ = gameworld.Add
		}
		if _, err := p.node.Apply([]gameworld.Change{{Type: typ, ID: id, Properties: gameworld.PropertiesOf(raw)}}); err != nil {
			t.Fatal(err)
		}
	}
	put("near", map[string]any{"position": []float64{1, 0, 1}, "n": 0})
	put("far", map[string]any{"position": []float64{100, 0, 0}, "n": 0})
	put("free", map[string]any{"n": 0})
	put("red", map[string]any{"position": []float64{2, 0, 0}, "room": "red"})
	put("blue", map[string]any{"position": []float64{3, 0, 0}, "room": "blue"})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	box := peer.Box{Min: [3]float64{-10, -10, -10}, Max: [3]float64{10, 10, 10}}
	a, err := Dial(ctx, p.srv.Addr().String(), ClientOptions{Interest: Interest{Boxes: []peer.Box{box}, Rooms: []string{"red"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	all, err := Dial(ctx, p.srv.Addr().String(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if err := a.Set("mine", map[string]any{"position": []float64{500, 0, 0}}); err != nil {
		t.Fatal(err)
	}

	holds := func(c *Client, want ...string) {
		t.Helper()
		sort.Strings(want)
		var got []string
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			got = slices.Sorted(maps.Keys(c.Objects()))
			if slices.Equal(got, want) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("the client holds %v, want %v", got, want)
	}
	holds(a, "near", "free", "red", "mine")
	holds(all, "near", "far", "free", "red", "blue", "mine")

	// Out and back, with a value changed while out of view.
	put("near", map[string]any{"position": []float64{50, 0, 0}})
	holds(a, "free", "red", "mine")
	put("near", map[string]any{"position": []float64{2, 0, 0}, "n": 5})
	holds(a, "near", "free", "red", "mine")
	waitProp(t, a, "near", "n", "5")

	// Within the margin a held ghost stays; past it, it goes.
	put("near", map[string]any{"position": []float64{11.5, 0, 0}, "n": 6})
	waitProp(t, a, "near", "n", "6")
	put("near", map[string]any{"position": []float64{12.5, 0, 0}})
	holds(a, "free", "red", "mine")

	// A new interest: the far object's region, no room filter.
	if err := a.SetInterest(Interest{Boxes: []peer.Box{{Min: [3]float64{90, -10, -10}, Max: [3]float64{110, 10, 10}}}}); err != nil {
		t.Fatal(err)
	}
	holds(a, "far", "free", "mine")
	put("far", map[string]any{"n": 9})
	waitProp(t, a, "far", "n", "9")

	for _, c := range []*Client{a, all} {
		objs := c.Objects()
		for id, props := range objs {
			o, ok := p.node.World().Get(id)
			if !ok {
				t.Errorf("the client holds %s, which the node does not", id)
				continue
			}
			if err := sameProps(o.Properties, props); err != nil {
				t.Errorf("%s: %v", id, err)
			}
		}
	}
}

// waitProp waits until c holds object id with property key encoded as
// want.
func waitProp(t *testing.T, c *Client, id, key, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if props, ok := c.Objects()[id]; ok && string(props.Value(key)) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	props := c.Objects()[id]
	t.Fatalf("%s.%s is %s, want %s", id, key, props.Value(key), want)
}

// sameProps compares two objects' properties as JSON values.
func sameProps(a, b gameworld.Properties) error {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var va, vb any
	json.Unmarshal(ja, &va)
	json.Unmarshal(jb, &vb)
	if fmt.Sprint(va) != fmt.Sprint(vb) {
		return fmt.Errorf("the client holds %s, the node %s", jb, ja)
	}
	return nil
}

// TestImportance: with Options.Near, when packets cannot hold every
// change, a client is sent the changes of ghosts near its region more
// often than those of far ones, which still get through; without Near,
// alike.
func TestImportance(t *testing.T) {
	for _, near := range []float64{0, 5} {
		t.Run(fmt.Sprint("near ", near), func(t *testing.T) {
			s := clockedServer()
			s.opts = Options{Rate: 60, MaxKbps: 48, Near: near}
			c := &conn{despawns: map[uint32]bool{}, loaded: 2}
			c.setInterestLocked(&interestOf{Seq: 1, Interest: Interest{Boxes: []peer.Box{{Min: [3]float64{-200, -1, -200}, Max: [3]float64{200, 1, 200}}}}})
			s.clients = map[netip.AddrPort]*conn{netip.MustParseAddrPort("127.0.0.1:1"): c}
			const each, ticks = 40, 1200
			pos := func(i int) float64 {
				if i < each {
					return 1 // near
				}
				return 150 // far: the last band
			}
			for tick := uint32(1); tick <= ticks; tick++ {
				s.tick = tick
				for i := range 2 * each {
					props, _ := json.Marshal(map[string]any{"position": []float64{pos(i), 0, 0}, "n": tick})
					var p gameworld.Properties
					json.Unmarshal(props, &p)
					s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("o%03d", i)}, After: p})
				}
				var w Writer
				s.snapshotLocked(c, &w)
				s.ackLocked(c, tick, 0)
			}
			var sends [2]float64
			for i := range 2 * each {
				g := s.objects[fmt.Sprintf("o%03d", i)]
				cg := c.ghosts[g.slot]
				if cg == nil || cg.n == 0 {
					t.Fatalf("o%03d was never sent", i)
				}
				sends[i/each] += float64(cg.n) / each
			}
			ratio := sends[0] / sends[1]
			t.Logf("sends per ghost over %d ticks: near %.1f, far %.1f (%.2f×)", ticks, sends[0], sends[1], ratio)
			if near > 0 && ratio < 3 {
				t.Errorf("near ghosts were sent %.2f× as often as far ones, want at least 3×", ratio)
			}
			if near == 0 && math.Abs(ratio-1) > 0.25 {
				t.Errorf("without Near, near ghosts were sent %.2f× as often as far ones, want about 1×", ratio)
			}
		})
	}
}

// BenchmarkRelevancy: 1,000 transform objects on a 120 × 75 m grid, 100
// of them moving every tick; 100 clients at 60 Hz that acknowledge every
// snapshot, each wanting everything ("everything") or a 30 × 30 m region
// around a point of the grid ("interest"). Reports what a client is sent
// and what the server spends a tick, on one goroutine:
//
//	go test ./bridge/snapshot -run '^$' -bench Relevancy -benchtime 600x
func BenchmarkRelevancy(b *testing.B) {
	const objects, moving, clients = 1000, 100, 100
	for _, region := range []bool{false, true} {
		name := "everything"
		if region {
			name = "interest"
		}
		b.Run(name, func(b *testing.B) {
			s := clockedServer()
			s.opts.InterestMargin = 2
			props := func(i, tick int) gameworld.Properties {
				x, z := float64(i%40)*3, float64(i/40)*3
				if i < moving {
					x += 2.0 / 60 * float64(tick) * math.Cos(float64(i))
					z += 2.0 / 60 * float64(tick) * math.Sin(float64(i))
				}
				return transform(x, z, float64(i)*0.1)
			}
			for i := range objects {
				s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("obj-%04d", i)}, After: props(i, 0)})
			}
			conns := make([]*conn, clients)
			for i := range conns {
				conns[i] = &conn{despawns: map[uint32]bool{}, loaded: 2}
				if region {
					x, z := float64(i%10)*12, float64(i/10)*7.5
					conns[i].setInterestLocked(&interestOf{Seq: 1, Interest: Interest{Boxes: []peer.Box{{Min: [3]float64{x - 15, -10, z - 15}, Max: [3]float64{x + 15, 10, z + 15}}}}})
				}
			}
			var w Writer
			var bits, ghosts int
			step := func(tick int) {
				s.tick = uint32(tick)
				for i := range moving {
					s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("obj-%04d", i)}, After: props(i, tick)})
				}
				for _, c := range conns {
					w.Reset()
					s.snapshotLocked(c, &w)
					s.ackLocked(c, uint32(tick), ^uint32(0))
					bits += w.Bits()
				}
			}
			tick := 1
			for ; tick < 300; tick++ { // every relevant ghost spawned and acknowledged
				step(tick)
			}
			bits = 0
			cpu0 := cpuTime()
			for b.Loop() {
				tick++
				step(tick)
			}
			cpu := cpuTime() - cpu0
			for _, c := range conns {
				for _, cg := range c.ghosts {
					if cg != nil {
						ghosts++
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(bits)/n/clients*60/1000, "kbit/s/client")
			b.ReportMetric(float64(ghosts)/clients, "ghosts/client")
			b.ReportMetric(float64(cpu.Microseconds())/n/1000, "cpu-ms/tick")
		})
	}
}

// TestBadInterest: a command whose interest no client could send (a box
// not finite, or inside out; too many boxes or rooms; a room name over
// the bound) is a bad packet, and changes nothing.
func TestBadInterest(t *testing.T) {
	box := func(v ...float64) peer.Box {
		return peer.Box{Min: [3]float64{v[0], v[1], v[2]}, Max: [3]float64{v[3], v[4], v[5]}}
	}
	many := make([]peer.Box, MaxInterestBoxes+1)
	rooms := make([]string, MaxInterestRooms+1)
	for _, tc := range []struct {
		name string
		in   Interest
	}{
		{"NaN", Interest{Boxes: []peer.Box{box(math.NaN(), 0, 0, 1, 1, 1)}}},
		{"infinite", Interest{Boxes: []peer.Box{box(0, 0, 0, math.Inf(1), 1, 1)}}},
		{"inside out", Interest{Boxes: []peer.Box{box(2, 0, 0, 1, 1, 1)}}},
		{"too many boxes", Interest{Boxes: many}},
		{"too many rooms", Interest{Rooms: rooms}},
		{"a long room name", Interest{Rooms: []string{strings.Repeat("r", MaxStringBytes+1)}}},
	} {
		var w Writer
		(&command{Tick: 1, Interest: &interestOf{Seq: 1, Interest: tc.in}}).write(&w)
		if c, err := decodeCommand(w.Bytes()); !errors.Is(err, ErrBadPacket) {
			t.Errorf("%s: decoded %+v, %v; want a bad packet", tc.name, c.Interest, err)
		}
		if err := checkInterest(tc.in); err == nil {
			t.Errorf("%s: the client would send it", tc.name)
		}
	}
}
