package interest_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

// takesBrute is what Shells.Take must find: every point measured.
var inf = math.Inf(1)

func takesBrute(p [3]float64, shells []interest.Shell, boxes []peer.Box) bool {
	d2 := interest.Dist2(p, boxes)
	for _, sh := range shells {
		if sh.Beyond < d2 && d2 <= sh.Within {
			return true
		}
	}
	return false
}

// viewer returns n boxes 20 wide, centred at coord() each way on the
// ground or, one in three, at the origin.
func viewer(rng *rand.Rand, n int, coord func() float64) []peer.Box {
	var boxes []peer.Box
	for range n {
		x, z := coord(), coord()
		if rng.IntN(3) == 0 {
			x, z = 0, 0
		}
		boxes = append(boxes, peer.Box{Min: [3]float64{x - 10, 0, z - 10}, Max: [3]float64{x + 10, 4, z + 10}})
	}
	return boxes
}

// takenBy returns whether a viewer of boxes takes each of sh's n points.
func takenBy(sh *interest.Shells, boxes []peer.Box, n int) func(i int) bool {
	taken := make([]uint64, (n+63)/64)
	cs := interest.CentresOf(boxes)
	sh.Take(&cs, taken)
	return func(i int) bool { return taken[i>>6]&(1<<(i&63)) != 0 }
}

// TestShells: Take finds what measuring every point finds, for kinds of
// one and two shells (apart, narrowly apart, meeting, overlapping, nested,
// unbounded),
// points clustered and spread, on bounds and off, viewers of 0 to 6 boxes;
// and used again after Reset.
func TestShells(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	kinds := [][]interest.Shell{
		nil,
		{{Beyond: -1, Within: 25}},
		{{Beyond: 25, Within: 100}},
		{{Beyond: 400, Within: inf}},
		{{Beyond: -1, Within: 25}, {Beyond: 25, Within: inf}},   // meeting
		{{Beyond: -1, Within: 25}, {Beyond: 100, Within: 400}},  // apart
		{{Beyond: 100, Within: 400}, {Beyond: -1, Within: 25}},  // apart, the far one first
		{{Beyond: -1, Within: 200}, {Beyond: 100, Within: 400}}, // overlapping
		{{Beyond: -1, Within: 900}, {Beyond: 100, Within: 400}}, // nested
		{{Beyond: -1, Within: inf}},
		{{Beyond: 26, Within: inf}, {Beyond: -1, Within: 25}}, // a narrow gap
	}
	var sh interest.Shells
	for round := range 40 {
		sh.Reset()
		type pt struct {
			p     [3]float64
			kind  int
			index int
		}
		pts := make([]pt, rng.IntN(700))
		spread := []float64{1, 30, 300}[round%3]
		for i := range pts {
			p := [3]float64{rng.NormFloat64() * spread, rng.Float64() * 4, rng.NormFloat64() * spread}
			if rng.IntN(4) == 0 { // on a bound from the centre of a box at the origin
				p = [3]float64{[]float64{5, 5.05, 10, 20, 30}[rng.IntN(5)], 2, 0}
			}
			k := rng.IntN(len(kinds))
			pts[i] = pt{p, k, sh.Add(p, kinds[k]...)}
			if pts[i].index != i {
				t.Fatalf("point %d added as %d", i, pts[i].index)
			}
		}
		sh.Build()
		if sh.Len() != len(pts) {
			t.Fatalf("Len %d, want %d", sh.Len(), len(pts))
		}
		for range 20 {
			boxes := viewer(rng, rng.IntN(7), func() float64 { return rng.NormFloat64() * spread })
			taken := takenBy(&sh, boxes, len(pts))
			for _, q := range pts {
				want := takesBrute(q.p, kinds[q.kind], boxes)
				if got := taken(q.index); got != want {
					t.Fatalf("round %d, %d boxes: point %v of kind %v (d² %v): taken %v, want %v",
						round, len(boxes), q.p, kinds[q.kind], interest.Dist2(q.p, boxes), got, want)
				}
			}
		}
	}
}

// BenchmarkShells: a crowd's tick, 450 dues of three kinds over 64 × 64
// units, taken by a viewer among them: through the cells (Take) and by
// measuring every due.
func BenchmarkShells(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	kinds := [][]interest.Shell{
		{{Beyond: 25, Within: 100}},
		{{Beyond: 25, Within: 400}},
		{{Beyond: -1, Within: 25}, {Beyond: 25, Within: inf}},
	}
	var sh interest.Shells
	type due struct {
		p    [3]float64
		kind int
	}
	var dues []due
	for i := range 450 {
		d := due{[3]float64{rng.Float64() * 64, 0, rng.Float64() * 64}, []int{0, 0, 1, 2}[i%4]}
		dues = append(dues, d)
		sh.Add(d.p, kinds[d.kind]...)
	}
	sh.Build()
	boxes := []peer.Box{{Min: [3]float64{20, -1, 20}, Max: [3]float64{30, 1, 30}}}
	cs := interest.CentresOf(boxes)
	taken := make([]uint64, (len(dues)+63)/64)
	b.Run("take", func(b *testing.B) {
		for b.Loop() {
			clear(taken)
			sh.Take(&cs, taken)
		}
	})
	b.Run("measure-every-due", func(b *testing.B) {
		for b.Loop() {
			clear(taken)
			for i, d := range dues {
				if takesBrute(d.p, kinds[d.kind], boxes) {
					taken[i>>6] |= 1 << (i & 63)
				}
			}
		}
	})
}

// TestBandShell: a viewer takes a point through the shells of the bands
// it is published to (as a node's schedule publishes: bands lo to hi, and
// band 0 or not) exactly when the point's Band is one of them. Many
// points a round, viewers of 1 to 6 boxes, 1 to 16 bands; points often
// right on a band's bound.
func TestBandShell(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const near = 5.0
	var sh interest.Shells
	type pub struct {
		p      [3]float64
		lo, hi int
		zero   bool
	}
	for _, bands := range []int{1, 2, 4, 5, 16} {
		top := bands - 1
		for round := range 20 {
			sh.Reset()
			pubs := make([]pub, 50+rng.IntN(600))
			for i := range pubs {
				u := &pubs[i]
				u.lo, u.zero = 1+rng.IntN(max(top, 1)+1), rng.IntN(2) == 0
				u.hi = min(u.lo+rng.IntN(max(top, 1)+1)-1, top) // (lo > hi: no band from 1)
				u.p = [3]float64{rng.Float64()*200 - 100, rng.Float64() * 4, rng.Float64()*200 - 100}
				if rng.IntN(2) == 0 { // on a bound from the centre of a box at the origin
					u.p = [3]float64{near * float64(uint64(1)<<rng.IntN(bands+1)), 2, 0}
				}
				var shells []interest.Shell
				if s, ok := interest.BandShell(near, bands, 0, 0); ok && u.zero {
					shells = append(shells, s)
				}
				if s, ok := interest.BandShell(near, bands, u.lo, u.hi); ok {
					shells = append(shells, s)
				}
				sh.Add(u.p, shells...)
			}
			sh.Build()
			for range 30 {
				boxes := viewer(rng, 1+rng.IntN(6), func() float64 { return rng.Float64()*200 - 100 })
				taken := takenBy(&sh, boxes, len(pubs))
				for i, u := range pubs {
					band := interest.Band(u.p, boxes, near, bands)
					want := (band == 0 && u.zero) || (band > 0 && band >= u.lo && band <= u.hi)
					if got := taken(i); got != want {
						t.Fatalf("%d bands, round %d, %d boxes: point at %v in band %d (d² %v), published to %d..%d zero %v: taken %v",
							bands, round, len(boxes), u.p, band, interest.Dist2(u.p, boxes), u.lo, u.hi, u.zero, got)
					}
				}
			}
		}
	}
}
