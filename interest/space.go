package interest

import (
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
)

// Space indexes a world's objects (an Index) and its viewers' regions by
// cell, so that a change visits only the viewers whose regions it leaves or
// enters, and a region change only the objects of the old and new regions.
// V is a viewer (the relay's link); a viewer is registered with its Region.
//
// A Space is built when the first region comes (Activate) and dropped some
// time after the last one went (Linger): building it visits the whole
// world. Its zero value with Props, Grid and Margin set is inactive.
type Space[V comparable] struct {
	Props  Props
	Grid   Grid
	Margin float64

	active   bool
	objects  Index
	links    map[Cell][]V
	wide     []V
	regioned []V
	// boxed are the regions with boxes (in links or wide); roomOnly those
	// of rooms alone, also listed by room in roomLinks.
	boxed     []V
	roomOnly  []V
	roomLinks map[string][]V
	// unusedSince is when the last region went, while none has come
	// since.
	unusedSince time.Time
}

// Linger is how long the index outlives the last region. Building it
// visits the whole world: a region that comes and goes (a node's whole
// interest when its last local client leaves and another comes, a bridge
// whose only client reconnects) must not cost that each time.
const Linger = 30 * time.Second

// Active reports whether the space is built.
func (s *Space[V]) Active() bool { return s.active }

// Objects returns the index of objects.
func (s *Space[V]) Objects() *Index { return &s.objects }

// Regioned returns the viewers registered with a region.
func (s *Space[V]) Regioned() []V { return s.regioned }

// Activate builds the space, if it is not, from the objects each calls its
// function with.
func (s *Space[V]) Activate(each func(fn func(slot uint32, id string, props gameworld.Properties) bool)) {
	if s.active {
		return
	}
	*s = Space[V]{Props: s.Props, Grid: s.Grid, Margin: s.Margin, active: true, links: map[Cell][]V{}, roomLinks: map[string][]V{}}
	each(func(slot uint32, id string, props gameworld.Properties) bool {
		s.Place(slot, id, props)
		return true
	})
}

// Place records an object's properties (zero: it is gone) and returns where
// it was, where it is now and its position.
func (s *Space[V]) Place(slot uint32, id string, props gameworld.Properties) (old, now Place, p [3]float64) {
	if !props.IsZero() {
		now = Place{ID: id, Room: s.Props.RoomOf(props), In: true}
		if p, now.HasP = s.Props.PositionOf(props); now.HasP {
			now.Cell = s.Grid.Of(p)
		}
	}
	return s.objects.Put(slot, now), now, p
}

// Register (re)registers v with region r (nil: none).
func (s *Space[V]) Register(v V, r *Region) {
	s.Unregister(v, r)
	if r == nil {
		return
	}
	if r.None {
		r.wide = true // not indexed: a change from or to it looks at the whole world
		return
	}
	s.regioned = append(s.regioned, v)
	s.unusedSince = time.Time{}
	if !r.HasBoxes {
		// Rooms alone: listed by room. It holds all of space, so a
		// change of it looks at the whole world.
		r.wide = true
		s.roomOnly = append(s.roomOnly, v)
		for room := range r.Rooms {
			s.roomLinks[room] = append(s.roomLinks[room], v)
		}
		return
	}
	s.boxed = append(s.boxed, v)
	cells, ok := s.Grid.Cover(r.Boxes, s.Margin)
	r.cells, r.wide = cells, !ok
	if !ok {
		s.wide = append(s.wide, v)
	}
	for _, c := range cells {
		s.links[c] = append(s.links[c], v)
	}
}

// Unregister takes v, registered with region r, out of the space.
func (s *Space[V]) Unregister(v V, r *Region) {
	if !s.active || r == nil {
		return
	}
	drop := func(list []V) []V {
		if i := slices.Index(list, v); i >= 0 {
			return append(list[:i:i], list[i+1:]...)
		}
		return list
	}
	for _, c := range r.cells {
		if l := drop(s.links[c]); len(l) > 0 {
			s.links[c] = l
		} else {
			delete(s.links, c)
		}
	}
	s.wide = drop(s.wide)
	s.regioned = drop(s.regioned)
	s.boxed = drop(s.boxed)
	s.roomOnly = drop(s.roomOnly)
	for room := range r.Rooms {
		if l := drop(s.roomLinks[room]); len(l) > 0 {
			s.roomLinks[room] = l
		} else {
			delete(s.roomLinks, room)
		}
	}
	r.cells = nil
}

// Visit calls visit with every viewer that must consider a change of an
// object (not a remove: every viewer with a region considers those) that
// was at old and is at now: those whose regions cover its cell before or
// after, those of its rooms, every boxed one if it has no position, the
// wide ones. A viewer may be visited more than once.
func (s *Space[V]) Visit(old, now Place, visit func(V)) {
	if len(s.roomOnly) > 0 {
		s.visitRooms(old, now, visit)
	}
	if (old.In && !old.HasP) || (now.In && !now.HasP) {
		for _, v := range s.boxed {
			visit(v)
		}
		return
	}
	if old.In {
		for _, v := range s.links[old.Cell] {
			visit(v)
		}
	}
	if now.In {
		for _, v := range s.links[now.Cell] {
			visit(v)
		}
	}
	for _, v := range s.wide {
		visit(v)
	}
}

// visitRooms visits each region of rooms alone that may see an object that
// was at old and is at now.
func (s *Space[V]) visitRooms(old, now Place, visit func(V)) {
	had, has := old.In, now.In
	if (had && old.Room == "") || (has && now.Room == "") {
		for _, v := range s.roomOnly {
			visit(v)
		}
		return
	}
	if had {
		for _, v := range s.roomLinks[old.Room] {
			visit(v)
		}
	}
	if has && (!had || now.Room != old.Room) {
		for _, v := range s.roomLinks[now.Room] {
			visit(v)
		}
	}
}

// InRegion calls fn with every object in r's cells and every object
// without a position (a superset of what r holds, found in time
// proportional to it), until fn returns false.
func (s *Space[V]) InRegion(r *Region, fn func(slot uint32, id string) bool) {
	visit := func(slot uint32) bool { return fn(slot, s.objects.Get(slot).ID) }
	for _, c := range r.cells {
		if !s.objects.InCell(c, visit) {
			return
		}
	}
	s.objects.Unplaced(visit)
}

// Unused notes, at now, that a region went; it returns when the space may
// be dropped if none comes meanwhile, or false if it is in use or already
// noted.
func (s *Space[V]) Unused(now time.Time) (drop time.Time, ok bool) {
	if !s.active || len(s.regioned) > 0 || !s.unusedSince.IsZero() {
		return time.Time{}, false
	}
	s.unusedSince = now
	return now.Add(Linger), true
}

// Expire drops the space if it has been unused for Linger at now; if it
// is unused for less, it returns when to look again.
func (s *Space[V]) Expire(now time.Time) (again time.Time, wait bool) {
	if !s.active || len(s.regioned) > 0 || s.unusedSince.IsZero() {
		return time.Time{}, false
	}
	if drop := s.unusedSince.Add(Linger); now.Before(drop) {
		return drop, true
	}
	*s = Space[V]{Props: s.Props, Grid: s.Grid, Margin: s.Margin}
	return time.Time{}, false
}
