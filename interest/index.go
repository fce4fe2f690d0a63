package interest

import (
	"maps"
	"slices"
)

// Place is where an Index holds an object.
type Place struct {
	ID string
	// Cell is the object's cell, if HasP (it has a position).
	Cell Cell
	HasP bool
	// In marks a slot the index holds an object in.
	In bool
	// Room is the object's room; empty if none.
	Room string
}

// Index holds a world's objects by the slot of each (gameworld's dense
// object numbers) and by cell. The zero value is empty and ready to use.
type Index struct {
	// at holds, by slot, where each object is: slots are dense, and a
	// slice costs a world of objects half what a map does.
	at       []Place
	objs     map[Cell]map[uint32]struct{}
	unplaced map[uint32]struct{}
	// peak is the most objects without a position since unplaced was
	// last rebuilt.
	peak int
}

// Get returns where the index has the object in slot (In false if none).
func (x *Index) Get(slot uint32) Place {
	if int(slot) < len(x.at) {
		return x.at[slot]
	}
	return Place{}
}

// Put records the object in slot at now (now.In false: it is gone) and
// returns where it was. After a flood of objects leaves, the index gives
// back the memory they took.
func (x *Index) Put(slot uint32, now Place) (old Place) {
	old = x.Get(slot)
	if old.In {
		if old.HasP {
			if set := x.objs[old.Cell]; set != nil {
				delete(set, slot)
				if len(set) == 0 {
					delete(x.objs, old.Cell)
				}
			}
		} else {
			delete(x.unplaced, slot)
		}
		x.at[slot] = Place{}
	}
	if !now.In {
		n := len(x.at)
		for n > 0 && !x.at[n-1].In {
			n--
		}
		x.at = x.at[:n]
		if cap(x.at) > 1024 && n < cap(x.at)/4 {
			x.at = slices.Clone(x.at)
		}
		if x.peak > 1024 && 4*len(x.unplaced) < x.peak {
			// Go maps keep their buckets when emptied: a fresh map
			// lets their memory go.
			x.unplaced = maps.Clone(x.unplaced)
			x.peak = len(x.unplaced)
		}
		return old
	}
	if now.HasP {
		if x.objs == nil {
			x.objs = map[Cell]map[uint32]struct{}{}
		}
		set := x.objs[now.Cell]
		if set == nil {
			set = map[uint32]struct{}{}
			x.objs[now.Cell] = set
		}
		set[slot] = struct{}{}
	} else {
		if x.unplaced == nil {
			x.unplaced = map[uint32]struct{}{}
		}
		x.unplaced[slot] = struct{}{}
	}
	for int(slot) >= len(x.at) {
		x.at = append(x.at, Place{})
	}
	x.at[slot] = now
	x.peak = max(x.peak, len(x.unplaced))
	return old
}

// InCell calls fn with the slot of every object in c, until fn returns
// false; it reports whether fn always returned true.
func (x *Index) InCell(c Cell, fn func(slot uint32) bool) bool {
	for slot := range x.objs[c] {
		if !fn(slot) {
			return false
		}
	}
	return true
}

// Unplaced calls fn with the slot of every object without a position, until
// fn returns false; it reports whether fn always returned true.
func (x *Index) Unplaced(fn func(slot uint32) bool) bool {
	for slot := range x.unplaced {
		if !fn(slot) {
			return false
		}
	}
	return true
}
