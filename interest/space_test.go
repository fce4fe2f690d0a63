package interest_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

func props(t *testing.T, kv ...string) gameworld.Properties {
	t.Helper()
	m := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return gameworld.PropertiesOf(m)
}

func TestRoomOf(t *testing.T) {
	pr := interest.Props{Position: "position", Room: "room"}
	for _, tc := range []struct{ raw, want string }{
		{`"hall"`, "hall"},
		{`"h\u0061ll"`, "hall"},
		{`""`, ""},
		{`3`, ""},
		{`"unterminated`, ""},
	} {
		if got := pr.RoomOf(props(t, "room", tc.raw)); got != tc.want {
			t.Errorf("RoomOf(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	box := []peer.Box{{Min: [3]float64{0, 0, 0}, Max: [3]float64{10, 10, 10}}}
	rooms := map[string]bool{"hall": true}
	for _, tc := range []struct {
		name string
		r    *interest.Region
		room string
		p    [3]float64
		hasP bool
		want peer.Verdict
	}{
		{"inside", region(box, true, nil), "", [3]float64{5, 5, 5}, true, peer.Send},
		{"in the margin", region(box, true, nil), "", [3]float64{11, 5, 5}, true, peer.Keep},
		{"outside", region(box, true, nil), "", [3]float64{13, 5, 5}, true, peer.Hide},
		{"no position", region(box, true, nil), "", [3]float64{}, false, peer.Send},
		{"other room", region(nil, false, rooms), "cellar", [3]float64{}, false, peer.Hide},
		{"its room", region(nil, false, rooms), "hall", [3]float64{}, false, peer.Send},
		{"no room", region(nil, false, rooms), "", [3]float64{}, false, peer.Send},
		{"its room, outside", region(box, true, rooms), "hall", [3]float64{50, 0, 0}, true, peer.Hide},
	} {
		if tc.r == nil {
			continue
		}
		if got := tc.r.Verdict(&interest.Spot{P: tc.p, HasP: tc.hasP, Room: tc.room}, 2); got != tc.want {
			t.Errorf("%s: Verdict = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func region(boxes []peer.Box, has bool, rooms map[string]bool) *interest.Region {
	return &interest.Region{Wants: interest.Wants{Boxes: boxes, HasBoxes: has, Rooms: rooms}}
}

func TestWants(t *testing.T) {
	box := []peer.Box{{Max: [3]float64{1, 1, 1}}}
	w := interest.WantsOf(peer.Metadata{Interest: box, HasInterest: true, Rooms: []string{"a"}, HasRooms: true})
	if w.Everything() || !w.InRoom("a") || w.InRoom("b") {
		t.Fatalf("WantsOf = %+v", w)
	}
	if !(interest.Wants{}).Same(nil) || w.Same(nil) || !w.Same(region(box, true, map[string]bool{"a": true})) {
		t.Fatal("Same")
	}
	if w.Equal(interest.Wants{Boxes: box, HasBoxes: true}) {
		t.Fatal("Equal ignores rooms")
	}
}

// The viewers a change visits: those whose cells it leaves or enters, those
// of its rooms, every boxed one when it has no position; never one whose
// cells and rooms it does not touch, nor a wide one (Wide lists those:
// every change concerns them).
func TestSpaceVisits(t *testing.T) {
	s := interest.Space[string]{Props: interest.Props{Position: "position", Room: "room"}, Grid: interest.Grid{Size: 10}, Margin: 1}
	s.Activate(func(func(uint32, string, gameworld.Properties) bool) {})
	regions := map[string]*interest.Region{
		"west": region([]peer.Box{{Min: [3]float64{0, 0, 0}, Max: [3]float64{5, 5, 5}}}, true, nil),
		"east": region([]peer.Box{{Min: [3]float64{100, 0, 0}, Max: [3]float64{105, 5, 5}}}, true, nil),
		"huge": region([]peer.Box{{Min: [3]float64{-1e6, -1e6, -1e6}, Max: [3]float64{1e6, 1e6, 1e6}}}, true, nil),
		"hall": region(nil, false, map[string]bool{"hall": true}),
		"idle": {None: true},
	}
	for v, r := range regions {
		s.Register(v, r)
	}
	if !regions["huge"].Wide() || !regions["hall"].Wide() || regions["west"].Wide() {
		t.Fatal("wide regions")
	}
	if got := len(s.Regioned()); got != 4 {
		t.Fatalf("%d regioned, want 4 (an idle region is not indexed)", got)
	}
	if got := s.Wide(); !slices.Equal(got, []string{"huge"}) {
		t.Fatalf("Wide() = %v, want the huge region alone (rooms alone are visited by room)", got)
	}
	visits := func(slot uint32, kv ...string) []string {
		old, now, _ := s.Place(slot, "o", props(t, kv...))
		var got []string
		s.Visit(old, now, func(v string) {
			if !slices.Contains(got, v) {
				got = append(got, v)
			}
		})
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		name string
		kv   []string
		want []string
	}{
		// (An object of no room is in every room: the hall sees it.)
		{"appears west", []string{"position", "[1,1,1]"}, []string{"hall", "west"}},
		{"moves east", []string{"position", "[101,1,1]"}, []string{"east", "hall", "west"}},
		{"stays east", []string{"position", "[102,1,1]"}, []string{"east", "hall"}},
		{"loses its position", []string{"color", `"red"`}, []string{"east", "hall", "west"}},
		{"enters the hall", []string{"room", `"hall"`}, []string{"east", "hall", "west"}},
		{"in the hall, placed", []string{"room", `"hall"`, "position", "[500,500,500]"}, []string{"east", "hall", "west"}},
		{"cellar, far", []string{"room", `"cellar"`, "position", "[500,500,500]"}, []string{"hall"}},
		{"cellar, still", []string{"room", `"cellar"`, "position", "[501,500,500]"}, nil},
	} {
		if got := visits(7, tc.kv...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: visits %v, want %v", tc.name, got, tc.want)
		}
	}
	var inWest []string
	s.Place(8, "w", props(t, "position", "[2,2,2]"))
	s.Place(9, "u", props(t, "color", `"blue"`))
	s.InRegion(regions["west"], func(_ uint32, id string) bool { inWest = append(inWest, id); return true })
	slices.Sort(inWest)
	if !slices.Equal(inWest, []string{"u", "w"}) {
		t.Fatalf("InRegion(west) = %v, want the object there and the unplaced one", inWest)
	}
	s.Unregister("west", regions["west"])
	if got := visits(8, "position", "[3,2,2]"); slices.Contains(got, "west") {
		t.Fatalf("an unregistered viewer was visited: %v", got)
	}
}

// The space lingers after its last region and is dropped once Linger has
// passed with none.
func TestSpaceLingers(t *testing.T) {
	s := interest.Space[int]{Grid: interest.Grid{Size: 10}}
	s.Activate(func(func(uint32, string, gameworld.Properties) bool) {})
	r := region([]peer.Box{{Max: [3]float64{1, 1, 1}}}, true, nil)
	s.Register(1, r)
	now := time.Unix(1000, 0)
	if _, ok := s.Unused(now); ok {
		t.Fatal("unused while a region is registered")
	}
	s.Unregister(1, r)
	drop, ok := s.Unused(now)
	if !ok || !drop.Equal(now.Add(interest.Linger)) {
		t.Fatalf("Unused = %v, %v", drop, ok)
	}
	if again, wait := s.Expire(now.Add(time.Second)); !wait || !again.Equal(drop) || !s.Active() {
		t.Fatal("dropped before Linger")
	}
	if _, wait := s.Expire(drop); wait || s.Active() {
		t.Fatal("not dropped after Linger")
	}
}

// A crowd whose regions overlap: viewers leave in any order (each taking
// the last one's place in the lists it was in), and every change visits
// exactly those still there, rooms included, and Wide lists the wide ones
// still there.
func TestSpaceCrowdLeaves(t *testing.T) {
	s := interest.Space[int]{Props: interest.Props{Position: "position", Room: "room"}, Grid: interest.Grid{Size: 10}}
	s.Activate(func(func(uint32, string, gameworld.Properties) bool) {})
	regions := map[int]*interest.Region{}
	for v := range 60 {
		switch v % 3 {
		case 0: // the same few cells
			regions[v] = region([]peer.Box{{Min: [3]float64{0, 0, 0}, Max: [3]float64{25, 5, 5}}}, true, nil)
		case 1: // a room
			regions[v] = region(nil, false, map[string]bool{"hall": true})
		default: // all of space
			regions[v] = region([]peer.Box{{Min: [3]float64{-1e6, -1e6, -1e6}, Max: [3]float64{1e6, 1e6, 1e6}}}, true, nil)
		}
		s.Register(v, regions[v])
	}
	left := map[int]bool{}
	order := []int{59, 0, 30, 1, 2, 58, 31, 17, 3, 44, 45, 46, 12, 13, 14, 57}
	for k, v := range order {
		s.Unregister(v, regions[v])
		left[v] = true
		if k%2 == 1 {
			s.Register(v, regions[v]) // and some come back
			delete(left, v)
		}
		old, now, _ := s.Place(1, "o", props(t, "position", fmt.Sprintf("[%d,1,1]", 1+k%2*10), "room", `"hall"`))
		got := map[int]bool{}
		s.Visit(old, now, func(v int) { got[v] = true })
		for _, v := range s.Wide() {
			if got[v] {
				t.Fatalf("after %d left: wide viewer %d visited", k+1, v)
			}
			got[v] = true
		}
		for v := range 60 {
			if got[v] == left[v] {
				t.Fatalf("after %d left: viewer %d visited %v, want %v", k+1, v, got[v], !left[v])
			}
		}
		if n := len(s.Regioned()); n != 60-len(left) {
			t.Fatalf("after %d left: %d regioned, want %d", k+1, n, 60-len(left))
		}
	}
}

// TestColumnsAround: every item within Side of a point on x and z is
// found around it, exactly Side away and across zero included, each once.
func TestColumnsAround(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, side := range []float64{0.1, 1, 5, 32} {
		var c interest.Columns
		for round := range 3 {
			c.Reset(side)
			var pts [][3]float64
			for i := range 600 {
				// Scattered points; multiples of side/4 far and wide; and
				// points exactly Side from those (where dividing by the
				// side rounds two columns apart, as 37.9 and 38 by 0.1).
				var p [3]float64
				switch i % 3 {
				case 0:
					p = [3]float64{(rng.Float64() - 0.5) * 10 * side, 0, (rng.Float64() - 0.5) * 10 * side}
				case 1:
					p = [3]float64{float64(rng.IntN(8001)-4000) * side / 4, rng.Float64() * 100, float64(rng.IntN(8001)-4000) * side / 4}
				case 2:
					p = pts[i-1]
					p[0] += side * float64(rng.IntN(3)-1)
					p[2] += side * float64(rng.IntN(3)-1)
				}
				pts = append(pts, p)
				c.Add(p, i)
			}
			for _, q := range pts {
				seen := map[int]int{}
				c.Around(q, func(i int) { seen[i]++ })
				for i, p := range pts {
					if seen[i] > 1 {
						t.Fatalf("side %v round %d: item %d found %d times", side, round, i, seen[i])
					}
					if math.Abs(p[0]-q[0]) <= side && math.Abs(p[2]-q[2]) <= side && seen[i] == 0 {
						t.Fatalf("side %v round %d: item %d at %v not found around %v", side, round, i, p, q)
					}
				}
			}
		}
	}
}

// TestCoarsen: more boxes than allowed become at most that many, which
// hold every point of every box: clients' regions on a grid (the union a
// proxy or mesh member announces), scattered ones, huge ones, few allowed.
func TestCoarsen(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	around := func(x, z, r float64) peer.Box {
		return peer.Box{Min: [3]float64{x - r, -r, z - r}, Max: [3]float64{x + r, r, z + r}}
	}
	for round := range 200 {
		var boxes []peer.Box
		switch round % 4 {
		case 0: // a block of the spread scenario: 12 × 12 clients 10 apart, seeing 25 around
			for i := range 144 {
				boxes = append(boxes, around(float64(i%12)*10+float64(round), float64(i/12)*10, 25))
			}
		case 1: // scattered
			for range 65 + rng.IntN(200) {
				boxes = append(boxes, around((rng.Float64()-0.5)*5000, (rng.Float64()-0.5)*5000, 1+rng.Float64()*50))
			}
		case 2: // a crowd's huge boxes and small ones
			for i := range 100 {
				r := 10000.0
				if i%2 == 0 {
					r = 3
				}
				boxes = append(boxes, around(rng.Float64()*60, rng.Float64()*60, r))
			}
		case 3: // two far apart clusters
			for i := range 130 {
				boxes = append(boxes, around(float64(i%2)*1e6+rng.Float64()*100, rng.Float64()*100, 20))
			}
		}
		most := []int{1, 4, 64}[rng.IntN(3)]
		out := interest.Coarsen(boxes, most, 32)
		if len(out) > most || len(out) == 0 {
			t.Fatalf("round %d: %d boxes into %d, at most %d wanted", round, len(boxes), len(out), most)
		}
		for _, b := range boxes {
			for range 20 {
				var p [3]float64
				for k := range 3 {
					p[k] = b.Min[k] + rng.Float64()*(b.Max[k]-b.Min[k])
					if rng.IntN(4) == 0 {
						p[k] = b.Max[k] // (a face)
					}
				}
				if !interest.Contains(out, p, 0) {
					t.Fatalf("round %d: %v of box %v is in none of %v", round, p, b, out)
				}
			}
		}
		if round%4 == 0 && most == 64 {
			// The block's regions cover 160 × 160 (plus y): one rectangle
			// of whole 8-unit columns (4-unit ones are too many for 144
			// boxes of 50 × 50), less than a column wider each way.
			if len(out) != 1 || out[0].Max[0]-out[0].Min[0] >= 160+16 || out[0].Max[2]-out[0].Min[2] >= 160+16 {
				t.Fatalf("round %d: a block's regions covered by %v", round, out)
			}
		}
	}
	few := []peer.Box{around(0, 0, 1), around(5, 5, 1)}
	if got := interest.Coarsen(few, 64, 32); !slices.Equal(got, few) {
		t.Fatalf("few boxes changed: %v", got)
	}
}

// TestCentres: distances measured from centres worked out once are
// Dist2's, for no box, one, as many as are kept, and more.
func TestCentres(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	box := func() peer.Box {
		x, y, z := rng.Float64()*100-50, rng.Float64()*10, rng.Float64()*100-50
		return peer.Box{Min: [3]float64{x, y, z}, Max: [3]float64{x + rng.Float64()*30, y + 2, z + rng.Float64()*30}}
	}
	for _, n := range []int{0, 1, 2, 4, 5, 9} {
		var boxes []peer.Box
		for range n {
			boxes = append(boxes, box())
		}
		cs := interest.CentresOf(boxes)
		for range 200 {
			p := [3]float64{rng.Float64()*300 - 150, rng.Float64() * 20, rng.Float64()*300 - 150}
			if got, want := cs.Dist2(p), interest.Dist2(p, boxes); got != want {
				t.Fatalf("%d boxes, %v: %v, want %v", n, p, got, want)
			}
		}
	}
}
