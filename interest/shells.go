package interest

import (
	"math"
	"slices"
)

// Shell is a range of squared distances from a viewer: a point in it is
// taken (Beyond < d² ≤ Within; a negative Beyond includes distance 0).
type Shell struct {
	Beyond, Within float64
}

// Shells finds, for many viewers, which of a set of points each takes: a
// viewer takes a point whose squared distance from the viewer's region
// (Dist2 from the nearest box's centre) lies in one of the point's
// shells. Points share their shells with many others (a node's bands of
// priority), and the points of each kind are kept in cells with their
// bounds, so a viewer takes or passes over a whole cell whose distances
// all lie in or out of the kind's shells, and measures only the points of
// cells its shells' bounds cross. (A crowd of a thousand viewers asks it
// of every tick's few hundred points; measuring every point for every
// viewer was a quarter of the node's work.)
//
// The zero value is empty. Add points, Build, then Take for each viewer;
// Reset empties it, keeping its memory. Take may run on many goroutines
// at once between a Build and the next Reset or Add.
type Shells struct {
	kinds []shellKind
	n     int
	built bool
}

type shellKind struct {
	shells []Shell // one or two
	pts    []shellPt
	cells  []shellCell
}

type shellPt struct {
	p [3]float64
	i int32 // the order it was added in
}

// shellCell holds pts[from:to] and their bounds.
type shellCell struct {
	min, max [3]float64
	from, to int32
}

// Reset empties s.
func (s *Shells) Reset() {
	for i := range s.kinds {
		s.kinds[i].pts = s.kinds[i].pts[:0]
		s.kinds[i].cells = s.kinds[i].cells[:0]
	}
	s.kinds = s.kinds[:0]
	s.n, s.built = 0, false
}

// Len returns how many points were added since the last Reset.
func (s *Shells) Len() int { return s.n }

// Add adds a point at p, taken within shells (one or two; none: never),
// and returns its index: the bit Take sets for it.
func (s *Shells) Add(p [3]float64, shells ...Shell) int {
	i := s.n
	s.n++
	s.built = false
	if len(shells) == 0 {
		return i
	}
	k := slices.IndexFunc(s.kinds, func(k shellKind) bool { return slices.Equal(k.shells, shells) })
	if k < 0 {
		k = len(s.kinds)
		if k < cap(s.kinds) {
			s.kinds = s.kinds[:k+1]
			s.kinds[k].shells = append(s.kinds[k].shells[:0], shells...)
		} else {
			s.kinds = append(s.kinds, shellKind{shells: slices.Clone(shells)})
		}
	}
	s.kinds[k].pts = append(s.kinds[k].pts, shellPt{p: p, i: int32(i)})
	return i
}

// perCell is about how many points a cell holds: few enough that a cell
// crossed by a shell's bound is measured cheaply, many enough that a
// viewer has few cells to look at.
const perCell = 16

// Build sorts the points of each kind into cells.
func (s *Shells) Build() {
	for k := range s.kinds {
		s.kinds[k].build()
	}
	s.built = true
}

func (k *shellKind) build() {
	k.cells = k.cells[:0]
	if len(k.pts) <= perCell {
		k.cells = append(k.cells, boundsOf(k.pts, 0, int32(len(k.pts))))
		return
	}
	// A square grid over x and z (worlds spread out on the ground): sides
	// that put perCell points in a cell were they spread evenly.
	lo, hi := k.pts[0].p, k.pts[0].p
	for _, q := range k.pts {
		for a := range 3 {
			lo[a], hi[a] = min(lo[a], q.p[a]), max(hi[a], q.p[a])
		}
	}
	w, d := hi[0]-lo[0], hi[2]-lo[2]
	side := math.Sqrt(max(w*d, 1e-9) * perCell / float64(len(k.pts)))
	side = max(side, w/64, d/64, 1e-9)
	nx, nz := int(w/side)+1, int(d/side)+1
	cellOf := func(p [3]float64) int {
		x := min(int((p[0]-lo[0])/side), nx-1)
		z := min(int((p[2]-lo[2])/side), nz-1)
		return x*nz + z
	}
	slices.SortStableFunc(k.pts, func(a, b shellPt) int { return cellOf(a.p) - cellOf(b.p) })
	from := 0
	for i := 1; i <= len(k.pts); i++ {
		if i == len(k.pts) || cellOf(k.pts[i].p) != cellOf(k.pts[from].p) {
			k.cells = append(k.cells, boundsOf(k.pts, int32(from), int32(i)))
			from = i
		}
	}
}

func boundsOf(pts []shellPt, from, to int32) shellCell {
	c := shellCell{from: from, to: to}
	if from == to {
		return c
	}
	c.min, c.max = pts[from].p, pts[from].p
	for _, q := range pts[from+1 : to] {
		for a := range 3 {
			c.min[a], c.max[a] = min(c.min[a], q.p[a]), max(c.max[a], q.p[a])
		}
	}
	return c
}

// Take sets, in taken (a bit for each point added, by index; at least
// Len bits), the bits of the points a viewer at cs takes. Bits already
// set stay. It panics if s was changed since its last Build.
func (s *Shells) Take(cs *Centres, taken []uint64) {
	if !s.built && s.n > 0 {
		panic("interest: Shells.Take before Build")
	}
	centres := cs.c[:cs.n]
	if cs.boxes != nil {
		centres = make([][3]float64, len(cs.boxes))
		for i, b := range cs.boxes {
			centres[i] = Centre(b)
		}
	}
	for k := range s.kinds {
		kind := &s.kinds[k]
		if len(centres) == 0 { // (no boxes: every distance is infinite)
			if kind.takes(math.Inf(1)) {
				for _, q := range kind.pts {
					taken[q.i>>6] |= 1 << (q.i & 63)
				}
			}
			continue
		}
		for c := range kind.cells {
			cell := &kind.cells[c]
			// Every point of the cell is between near and far from the
			// nearest centre (rounding keeps the order: see cellRange).
			near, far := cellRange(cell, centres[0])
			for _, o := range centres[1:] {
				n, f := cellRange(cell, o)
				near, far = min(near, n), min(far, f)
			}
			switch {
			case kind.within(near, far):
				for _, q := range kind.pts[cell.from:cell.to] {
					taken[q.i>>6] |= 1 << (q.i & 63)
				}
			case kind.crosses(near, far):
				for _, q := range kind.pts[cell.from:cell.to] {
					d2 := dist2(q.p, centres[0])
					for _, o := range centres[1:] {
						d2 = min(d2, dist2(q.p, o))
					}
					if kind.takes(d2) {
						taken[q.i>>6] |= 1 << (q.i & 63)
					}
				}
			}
		}
	}
}

// cellRange returns bounds of the squared distances from o to the points
// of cell: near is to the nearest point of its bounds, far to the farthest
// corner. They are worked out as dist2 works a point's out, axis by axis
// with the same operations, and rounding is monotonic, so no point's
// dist2 is below near or above far.
func cellRange(cell *shellCell, o [3]float64) (near, far float64) {
	nx, fx := axisRange(cell.min[0]-o[0], cell.max[0]-o[0])
	ny, fy := axisRange(cell.min[1]-o[1], cell.max[1]-o[1])
	nz, fz := axisRange(cell.min[2]-o[2], cell.max[2]-o[2])
	return nx*nx + ny*ny + nz*nz, fx*fx + fy*fy + fz*fz
}

// axisRange returns the nearest and farthest of lo to hi from 0, signed
// as they are (their squares are what counts).
func axisRange(lo, hi float64) (near, far float64) {
	switch {
	case lo > 0:
		near = lo
	case hi < 0:
		near = hi
	}
	far = hi
	if -lo > hi {
		far = -lo
	}
	return near, far
}

// takes reports whether squared distance d2 is in one of k's shells.
func (k *shellKind) takes(d2 float64) bool {
	for _, sh := range k.shells {
		if sh.Beyond < d2 && d2 <= sh.Within {
			return true
		}
	}
	return false
}

// within reports whether every squared distance from near to far is in
// one shell of k (or in two that meet).
func (k *shellKind) within(near, far float64) bool {
	for _, sh := range k.shells {
		if sh.Beyond < near && far <= sh.Within {
			return true
		}
	}
	if len(k.shells) == 2 {
		a, b := k.shells[0], k.shells[1]
		if b.Beyond < a.Beyond {
			a, b = b, a
		}
		if b.Beyond <= a.Within && a.Beyond < near && far <= max(a.Within, b.Within) {
			return true
		}
	}
	return false
}

// crosses reports whether some squared distance from near to far is in
// one of k's shells.
func (k *shellKind) crosses(near, far float64) bool {
	for _, sh := range k.shells {
		if sh.Beyond < far && near <= sh.Within {
			return true
		}
	}
	return false
}
