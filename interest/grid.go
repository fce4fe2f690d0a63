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

// Dist2 returns the squared distance from p to the centre of the nearest
// of boxes (+Inf for none).
func Dist2(p [3]float64, boxes []peer.Box) float64 {
	d2 := math.Inf(1)
	for _, bx := range boxes {
		var s float64
		for k := range 3 {
			c := (bx.Min[k] + bx.Max[k]) / 2
			s += (p[k] - c) * (p[k] - c)
		}
		d2 = min(d2, s)
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
