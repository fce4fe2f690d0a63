package interest

// Columns groups items (a flush's log entries, by index) by where they
// are, in square columns of the x–z plane whose side is Side: every item
// within Side of a point lies in the nine columns around it, so that a
// viewer looks for what is near it among those rather than among all.
// A crowd's clients under priority each take only their near changes
// from a tick's log; the rest wait for the schedule.
//
// The zero value with Side set is empty. A Columns is not safe for
// concurrent use while it is being filled; once filled, Around may be
// called from many goroutines.
type Columns struct {
	Side float64
	cols map[[2]int32][]int
}

// Reset empties c, keeping its memory for the next round, with columns
// of side side.
func (c *Columns) Reset(side float64) {
	c.Side = side
	for k, v := range c.cols {
		if len(v) == 0 {
			delete(c.cols, k) // (unused a whole round: where nothing moves now)
			continue
		}
		c.cols[k] = v[:0]
	}
}

// Add puts item i, at p, in its column.
func (c *Columns) Add(p [3]float64, i int) {
	if c.cols == nil {
		c.cols = make(map[[2]int32][]int)
	}
	k := c.column(p)
	c.cols[k] = append(c.cols[k], i)
}

// Around calls fn with every item in the nine columns around p: every
// item within Side of p on both x and z, and some farther. An item comes
// once per call, columns in no particular order.
func (c *Columns) Around(p [3]float64, fn func(i int)) {
	if len(c.cols) == 0 {
		return
	}
	k := c.column(p)
	for dx := int32(-1); dx <= 1; dx++ {
		for dz := int32(-1); dz <= 1; dz++ {
			x, z := k[0]+dx, k[1]+dz
			if (dx < 0 && x > k[0]) || (dx > 0 && x < k[0]) || (dz < 0 && z > k[1]) || (dz > 0 && z < k[1]) {
				continue // (beyond the grid's range: the outermost column is there already)
			}
			for _, i := range c.cols[[2]int32{x, z}] {
				fn(i)
			}
		}
	}
}

func (c *Columns) column(p [3]float64) [2]int32 {
	// A hair wider than Side, so that two points Side apart are never
	// two columns apart by rounding.
	cell := Grid{Size: c.Side * (1 + 1e-6)}.Of(p)
	return [2]int32{cell[0], cell[2]}
}
