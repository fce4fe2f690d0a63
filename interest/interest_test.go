package interest

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/solipsism/mesh/peer"
)

func TestParseVec3(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [3]float64
		ok   bool
	}{
		{"[1,2,3]", [3]float64{1, 2, 3}, true},
		{" [ -1.5 , 2e3,\n0 ] ", [3]float64{-1.5, 2000, 0}, true},
		{"[1,2]", [3]float64{}, false},
		{"[1,2,3,4]", [3]float64{}, false},
		{`["1",2,3]`, [3]float64{}, false},
		{"[1e999,0,0]", [3]float64{}, false},
		{"{}", [3]float64{}, false},
		{"", [3]float64{}, false},
		{"[1,2,3]x", [3]float64{}, false},
	} {
		got, ok := ParseVec3([]byte(tc.in))
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("ParseVec3(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseVec3: whatever ParseVec3 takes, encoding/json reads as the same
// three finite numbers.
func FuzzParseVec3(f *testing.F) {
	for _, s := range []string{"[1,2,3]", " [ -1.5 , 2e3,\n0 ] ", "[1,2]", "[1e999,0,0]", "[0x1,0,0]", "[+1,0,0]", "[.5,0,0]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := ParseVec3(b)
		if !ok {
			return
		}
		var v []float64
		if err := json.Unmarshal(b, &v); err != nil {
			// ParseVec3 is laxer than JSON in the number forms it takes
			// ("+1", ".5"): those still read as numbers, and finite ones.
			for _, x := range p {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%q: %v", b, p)
				}
			}
			return
		}
		if len(v) != 3 || v[0] != p[0] || v[1] != p[1] || v[2] != p[2] {
			t.Fatalf("%q: ParseVec3 %v, json %v", b, p, v)
		}
	})
}

func TestGrid(t *testing.T) {
	g := Grid{Size: 10}
	for _, tc := range []struct {
		p    [3]float64
		want Cell
	}{
		{[3]float64{0, 0, 0}, Cell{0, 0, 0}},
		{[3]float64{9.9, -0.1, 10}, Cell{0, -1, 1}},
		{[3]float64{1e300, -1e300, 0}, Cell{math.MaxInt32, math.MinInt32, 0}},
	} {
		if got := g.Of(tc.p); got != tc.want {
			t.Errorf("Of(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	box := peer.Box{Min: [3]float64{0, 0, 0}, Max: [3]float64{15, 5, 5}}
	cells, ok := g.Cover([]peer.Box{box, box}, 0)
	if !ok || len(cells) != 2 {
		t.Errorf("Cover of one box twice: %v %v, want the 2 cells once each", cells, ok)
	}
	// Grown by 1: x from -1 to 16 (cells -1 to 1), y and z from -1 to 6
	// (cells -1 and 0).
	if cells, _ := g.Cover([]peer.Box{box}, 1); len(cells) != 3*2*2 {
		t.Errorf("Cover grown by 1: %d cells, want 12: %v", len(cells), cells)
	}
	if _, ok := g.Cover([]peer.Box{{Max: [3]float64{1e6, 1e6, 1e6}}}, 0); ok {
		t.Error("a box of 1e15 cells was covered")
	}
	if !Contains([]peer.Box{box}, [3]float64{16, 0, 0}, 2) || Contains([]peer.Box{box}, [3]float64{16, 0, 0}, 0) {
		t.Error("Contains does not grow boxes by the margin")
	}
}

func TestIndex(t *testing.T) {
	var x Index
	g := Grid{Size: 10}
	x.Put(3, Place{ID: "a", Cell: g.Of([3]float64{1, 1, 1}), HasP: true, In: true})
	x.Put(5, Place{ID: "b", In: true, Room: "hall"})
	slots := func(c Cell) (out []uint32) {
		x.InCell(c, func(s uint32) bool { out = append(out, s); return true })
		return out
	}
	if got := slots(Cell{}); len(got) != 1 || got[0] != 3 {
		t.Fatalf("cell 0: %v", got)
	}
	old := x.Put(3, Place{ID: "a", Cell: Cell{1, 0, 0}, HasP: true, In: true})
	if !old.In || old.Cell != (Cell{}) || len(slots(Cell{})) != 0 || len(slots(Cell{1, 0, 0})) != 1 {
		t.Fatalf("a move: old %+v, cells %v %v", old, slots(Cell{}), slots(Cell{1, 0, 0}))
	}
	var unplaced []uint32
	x.Unplaced(func(s uint32) bool { unplaced = append(unplaced, s); return true })
	if len(unplaced) != 1 || unplaced[0] != 5 || x.Get(5).Room != "hall" {
		t.Fatalf("unplaced %v, slot 5 %+v", unplaced, x.Get(5))
	}
	x.Put(5, Place{})
	x.Put(3, Place{})
	if x.Get(3).In || x.Get(5).In || len(x.at) != 0 {
		t.Fatalf("after removing both: %+v", x.at)
	}
}

// BenchmarkParseVec3 reads a typical position.
func BenchmarkParseVec3(b *testing.B) {
	raw := []byte("[12.5,1.75,-340.25]")
	for b.Loop() {
		ParseVec3(raw)
	}
}

func TestBand(t *testing.T) {
	boxes := []peer.Box{{Min: [3]float64{-1, -1, -1}, Max: [3]float64{1, 1, 1}}, {Min: [3]float64{99, -1, -1}, Max: [3]float64{101, 1, 1}}}
	for _, tc := range []struct {
		p     [3]float64
		near  float64
		bands int
		want  int
	}{
		{[3]float64{3, 0, 0}, 5, 4, 0},   // within near of the first centre
		{[3]float64{0, 0, 5}, 5, 4, 0},   // on near
		{[3]float64{0, 7, 0}, 5, 4, 1},   // within 2·near
		{[3]float64{0, 0, 15}, 5, 4, 2},  // within 4·near
		{[3]float64{50, 0, 0}, 5, 4, 3},  // past 8·near: the last band
		{[3]float64{50, 0, 0}, 5, 2, 1},  // fewer bands
		{[3]float64{97, 0, 0}, 5, 4, 0},  // near the second box
		{[3]float64{500, 0, 0}, 0, 4, 0}, // no near: everything in band 0
	} {
		if got := Band(tc.p, boxes, tc.near, tc.bands); got != tc.want {
			t.Errorf("Band(%v, near %g, %d bands) = %d, want %d", tc.p, tc.near, tc.bands, got, tc.want)
		}
	}
	if got := Band([3]float64{500, 0, 0}, nil, 5, 4); got != 0 {
		t.Errorf("Band without boxes = %d, want 0", got)
	}
}
