package relay

import (
	"math/rand/v2"
	"testing"

	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// TestDueTakenAt: a link takes a due exactly when the object's band for
// the link's region (interest.Band) is one the due is published to: 0 if
// Zero, else Min to Max; an object without a position counts as band 0.
func TestDueTakenAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const near = 5.0
	for _, bands := range []int{1, 2, 4, 5, 16} {
		top := bands - 1
		bounds := bandBounds(near*near, top)
		for range 4000 {
			var boxes []peer.Box
			for range 1 + rng.IntN(3) {
				x, z := rng.Float64()*200-100, rng.Float64()*200-100
				boxes = append(boxes, peer.Box{Min: [3]float64{x - 10, -5, z - 10}, Max: [3]float64{x + 10, 5, z + 10}})
			}
			d := priority.Due[interest.Spot]{Min: 1 + rng.IntN(max(top, 1)+1), Zero: rng.IntN(2) == 0}
			d.Max = d.Min + rng.IntN(max(top, 1)+1) - 1 // (Min > Max: no band from 1)
			d.Max = min(d.Max, top)
			d.Place.HasP = rng.IntN(8) != 0
			if d.Place.HasP {
				// Often right on a band's bound.
				c := interest.Centre(boxes[0])
				r := near * float64(uint64(1)<<rng.IntN(bands+1))
				if rng.IntN(2) == 0 {
					r = rng.Float64() * near * float64(uint64(1)<<bands)
				}
				d.Place.P = [3]float64{c[0] + r, c[1], c[2]}
			}
			a := dueAtOf(&d, top)
			cs := interest.CentresOf(boxes)
			var d2 float64
			if d.Place.HasP {
				d2 = cs.Dist2(d.Place.P)
				if one := cs.One(); one != nil {
					d2 = interest.PointDist2(d.Place.P, *one)
				}
			}
			band := 0
			if d.Place.HasP {
				band = interest.Band(d.Place.P, boxes, near, bands)
			}
			want := (band == 0 && d.Zero) || (band > 0 && band >= d.Min && band <= d.Max)
			if got := a.takenAt(d2, &bounds); got != want {
				t.Fatalf("%d bands, band %d (d² %v), published to %d..%d zero %v: taken %v", bands, band, d2, d.Min, d.Max, d.Zero, got)
			}
		}
	}
}
