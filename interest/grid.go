package interest

import (
	"math"

	"github.com/solipsism/mesh/peer"
)

// MaxRegionCells bounds how many cells Cover lists for one region; a
// larger region is checked against every change instead.
const MaxRegionCells = 4096

// Cell is one cell of a Grid.
type Cell [3]int32

// Grid cuts space into cubes of side Size (positive).
type Grid struct {
	Size float64
}

// Of returns the cell that holds p; coordinates beyond the grid's range
// fall into its outermost cells.
func (g Grid) Of(p [3]float64) Cell {
	var c Cell
	for i := range 3 {
		v := math.Floor(p[i] / g.Size)
		c[i] = int32(max(min(v, math.MaxInt32), math.MinInt32))
	}
	return c
}

// Cover returns the cells boxes cover when grown by margin, each once, or
// false if they are more than MaxRegionCells.
func (g Grid) Cover(boxes []peer.Box, margin float64) ([]Cell, bool) {
	seen := map[Cell]bool{}
	var out []Cell
	for _, b := range boxes {
		lo := g.ofCorner(b.Min, -margin)
		hi := g.ofCorner(b.Max, margin)
		count := 1.0
		for i := range 3 {
			count *= float64(hi[i]) - float64(lo[i]) + 1
		}
		if count > MaxRegionCells {
			return nil, false
		}
		for x := lo[0]; x <= hi[0]; x++ {
			for y := lo[1]; y <= hi[1]; y++ {
				for z := lo[2]; z <= hi[2]; z++ {
					c := Cell{x, y, z}
					if !seen[c] {
						seen[c] = true
						out = append(out, c)
					}
				}
			}
		}
	}
	return out, true
}

// ofCorner is the cell of a box's corner p moved by grow on every axis.
func (g Grid) ofCorner(p [3]float64, grow float64) Cell {
	for i := range p {
		p[i] = max(min(p[i]+grow, 1e15), -1e15)
	}
	return g.Of(p)
}

// Contains reports whether one of boxes, grown by margin, holds p.
func Contains(boxes []peer.Box, p [3]float64, margin float64) bool {
	for _, b := range boxes {
		if b.Contains(p, margin) {
			return true
		}
	}
	return false
}

// Band returns how far p is from the centre of the nearest of boxes, in
// bands: 0 within near, b within near·2^b, at most bands-1. With near
// not positive or no boxes, every position is in band 0. (Squared
// distances: no roots.)
func Band(p [3]float64, boxes []peer.Box, near float64, bands int) int {
	if near <= 0 || len(boxes) == 0 {
		return 0
	}
	d2 := Dist2(p, boxes)
	band, r2 := 0, near*near
	for band < bands-1 && d2 > r2 {
		band, r2 = band+1, r2*4
	}
	return band
}

// BandShell returns the squared distances of bands lo to hi by Band's
// near and bands: a point whose Dist2 is in the shell is in one of them
// (a viewer's shell of a point published to those bands, for Shells). ok
// is false if no distance is (lo > hi).
func BandShell(near float64, bands, lo, hi int) (sh Shell, ok bool) {
	top := bands - 1
	bound := func(b int) float64 { // (band b's farthest)
		if b >= top || near <= 0 {
			return math.Inf(1)
		}
		return near * near * float64(uint64(1)<<(2*b))
	}
	sh.Beyond = -1
	if lo > 0 {
		sh.Beyond = bound(lo - 1)
	}
	sh.Within = bound(hi)
	return sh, lo <= hi && sh.Beyond < sh.Within
}

// Dist2 returns the squared distance from p to the centre of the nearest
// of boxes (+Inf for none).
func Dist2(p [3]float64, boxes []peer.Box) float64 {
	d2 := math.Inf(1)
	for _, bx := range boxes {
		d2 = min(d2, dist2(p, Centre(bx)))
	}
	return d2
}

// Centre returns the centre of b, from which Dist2 measures.
func Centre(b peer.Box) [3]float64 {
	return [3]float64{(b.Min[0] + b.Max[0]) / 2, (b.Min[1] + b.Max[1]) / 2, (b.Min[2] + b.Max[2]) / 2}
}

func dist2(p, c [3]float64) float64 {
	x, y, z := p[0]-c[0], p[1]-c[1], p[2]-c[2]
	return x*x + y*y + z*z
}

// Centres measures Dist2 from the same boxes to many points, their
// centres worked out once (a crowd's viewer measures most of the crowd
// every tick). The zero value has no boxes.
type Centres struct {
	c     [4][3]float64
	n     int
	boxes []peer.Box // more than fit in c: measured by Dist2
}

// CentresOf returns the Centres of boxes.
func CentresOf(boxes []peer.Box) Centres {
	var cs Centres
	if len(boxes) > len(cs.c) {
		cs.boxes = boxes
		return cs
	}
	for _, b := range boxes {
		cs.c[cs.n] = Centre(b)
		cs.n++
	}
	return cs
}

// Dist2 is Dist2(p, boxes) for the boxes cs was made of.
func (cs *Centres) Dist2(p [3]float64) float64 {
	if cs.boxes != nil {
		return Dist2(p, cs.boxes)
	}
	d2 := math.Inf(1)
	for _, c := range cs.c[:cs.n] {
		d2 = min(d2, dist2(p, c))
	}
	return d2
}

// SameBoxes reports whether a and b are the same boxes in the same order.
func SameBoxes(a, b []peer.Box) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
