package interest

import (
	"math"
	"slices"

	"github.com/solipsism/mesh/peer"
)

// maxCoarseCells bounds the cells Coarsen looks at in one try; past it,
// it tries cells twice as wide.
const maxCoarseCells = 1 << 14

// coarsest is how much finer than cell Coarsen's first try is: the cover
// of a block of clients overshoots their regions by up to a column on
// each side, and everything in that strip is sent to the node for no one
// (a mesh of 4 members, each with 150 clients seeing 25 around them,
// took in about 40 objects more each with 32-unit columns than with 8).
// Finer than an eighth of a cell (4 units by default, twice the interest
// margin) would gain little beside the margin.
const coarsest = 8

// Coarsen returns at most most boxes (most ≥ 1) that hold every point of
// boxes: boxes itself if there are few enough, else the square columns
// that boxes reach on x and z, merged into rectangles, each as high as
// all of boxes together: columns of side cell/8 if at most maxCoarseCells
// of them and at most most rectangles do, else twice as wide, and so on.
// A node whose clients hold more regions than one metadata may name
// (peer.MaxInterestBoxes) announces this cover of them upstream and to
// the mesh, rather than everything: it is sent a little more than its
// clients see, not the whole world.
func Coarsen(boxes []peer.Box, most int, cell float64) []peer.Box {
	if len(boxes) <= most || most < 1 {
		return boxes
	}
	if !(cell > 0) {
		cell = 1
	}
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, b := range boxes {
		ylo, yhi = min(ylo, b.Min[1]), max(yhi, b.Max[1])
	}
	for side := cell / coarsest; ; side *= 2 {
		rects, ok := columns(boxes, side)
		if !ok || len(rects) > most {
			continue
		}
		out := make([]peer.Box, len(rects))
		for i, r := range rects {
			out[i] = peer.Box{
				Min: [3]float64{float64(r.x0) * side, ylo, float64(r.z0) * side},
				Max: [3]float64{float64(r.x1+1) * side, yhi, float64(r.z1+1) * side},
			}
		}
		return out
	}
}

// rect is a rectangle of columns, from (x0, z0) to (x1, z1) inclusive.
type rect struct{ x0, x1, z0, z1 int64 }

// columns returns the columns of side side that boxes reach, as
// rectangles: runs along x in each row of z, and runs alike in
// consecutive rows merged. ok is false if they reach too many.
func columns(boxes []peer.Box, side float64) ([]rect, bool) {
	col := func(v float64) int64 { return int64(math.Floor(max(min(v/side, 1e15), -1e15))) }
	total := 0.0
	for _, b := range boxes {
		total += float64(col(b.Max[0])-col(b.Min[0])+1) * float64(col(b.Max[2])-col(b.Min[2])+1)
		if total > maxCoarseCells {
			return nil, false
		}
	}
	cells := make(map[[2]int64]bool, int(total))
	for _, b := range boxes {
		for x := col(b.Min[0]); x <= col(b.Max[0]); x++ {
			for z := col(b.Min[2]); z <= col(b.Max[2]); z++ {
				cells[[2]int64{z, x}] = true
			}
		}
	}
	keys := make([][2]int64, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]int64) int {
		if a[0] != b[0] {
			return int(sign(a[0] - b[0]))
		}
		return int(sign(a[1] - b[1]))
	})
	// Runs along x, row by row (keys sorted by z, then x).
	var runs []rect
	for _, k := range keys {
		if n := len(runs); n > 0 && runs[n-1].z0 == k[0] && runs[n-1].x1+1 == k[1] {
			runs[n-1].x1 = k[1]
			continue
		}
		runs = append(runs, rect{x0: k[1], x1: k[1], z0: k[0], z1: k[0]})
	}
	// A run that continues one of the row before (same x0 and x1) joins it.
	var out []rect
	open := map[[2]int64]int{} // (x0, x1) → index in out of a rectangle ending at the row before
	for _, r := range runs {
		if i, ok := open[[2]int64{r.x0, r.x1}]; ok && out[i].z1+1 == r.z0 {
			out[i].z1 = r.z0
			continue
		}
		open[[2]int64{r.x0, r.x1}] = len(out)
		out = append(out, r)
	}
	return out, true
}

func sign(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
