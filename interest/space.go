package interest

import (
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
	links    map[Cell]*roster[V]
	wide     roster[V]
	regioned roster[V]
	// boxed are the regions with boxes listed by cell (not wide);
	// roomOnly those of rooms alone, also listed by room in roomLinks.
	boxed     roster[V]
	roomOnly  roster[V]
	roomLinks map[string]*roster[V]
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
func (s *Space[V]) Regioned() []V { return s.regioned.items }

// Activate builds the space, if it is not, from the objects each calls its
// function with.
func (s *Space[V]) Activate(each func(fn func(slot uint32, id string, props gameworld.Properties) bool)) {
	if s.active {
		return
	}
	*s = Space[V]{Props: s.Props, Grid: s.Grid, Margin: s.Margin, active: true, links: map[Cell]*roster[V]{}, roomLinks: map[string]*roster[V]{}}
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
	s.regioned.add(v)
	s.unusedSince = time.Time{}
	if !r.HasBoxes {
		// Rooms alone: listed by room. It holds all of space, so a
		// change of it looks at the whole world.
		r.wide = true
		s.roomOnly.add(v)
		for room := range r.Rooms {
			rosterOf(s.roomLinks, room).add(v)
		}
		return
	}
	cells, ok := s.Grid.Cover(r.Boxes, s.Margin)
	r.cells, r.wide = cells, !ok
	if !ok {
		s.wide.add(v)
	} else {
		s.boxed.add(v)
	}
	for _, c := range cells {
		rosterOf(s.links, c).add(v)
	}
}

// Unregister takes v, registered with region r, out of the space. It
// takes time in proportion to r's cells, whatever the number of viewers:
// a crowd of a thousand whose regions overlap comes and goes at the cost
// of each one's own cells.
func (s *Space[V]) Unregister(v V, r *Region) {
	if !s.active || r == nil {
		return
	}
	for _, c := range r.cells {
		if l := s.links[c]; l != nil && l.remove(v) && len(l.items) == 0 {
			delete(s.links, c)
		}
	}
	s.wide.remove(v)
	s.regioned.remove(v)
	s.boxed.remove(v)
	s.roomOnly.remove(v)
	for room := range r.Rooms {
		if l := s.roomLinks[room]; l != nil && l.remove(v) && len(l.items) == 0 {
			delete(s.roomLinks, room)
		}
	}
	r.cells = nil
}

// Visit calls visit with every viewer that must consider a change of an
// object (not a remove: every viewer with a region considers those) that
// was at old and is at now: those whose regions cover its cell before or
// after, those of its rooms, every boxed one if it has no position. The
// wide ones (Wide) are not visited: every change concerns them, so their
// caller need not be told so once per change and viewer. A viewer may be
// visited more than once.
func (s *Space[V]) Visit(old, now Place, visit func(V)) {
	if len(s.roomOnly.items) > 0 {
		s.visitRooms(old, now, visit)
	}
	if (old.In && !old.HasP) || (now.In && !now.HasP) {
		for _, v := range s.boxed.items {
			visit(v)
		}
		return
	}
	if old.In {
		for _, v := range s.links[old.Cell].list() {
			visit(v)
		}
	}
	if now.In {
		for _, v := range s.links[now.Cell].list() {
			visit(v)
		}
	}
}

// Wide returns the viewers whose regions have boxes too wide to list by
// cell: Visit leaves them out, as every change concerns them.
func (s *Space[V]) Wide() []V { return s.wide.items }

// visitRooms visits each region of rooms alone that may see an object that
// was at old and is at now.
func (s *Space[V]) visitRooms(old, now Place, visit func(V)) {
	had, has := old.In, now.In
	if (had && old.Room == "") || (has && now.Room == "") {
		for _, v := range s.roomOnly.items {
			visit(v)
		}
		return
	}
	if had {
		for _, v := range s.roomLinks[old.Room].list() {
			visit(v)
		}
	}
	if has && (!had || now.Room != old.Room) {
		for _, v := range s.roomLinks[now.Room].list() {
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
	if !s.active || len(s.regioned.items) > 0 || !s.unusedSince.IsZero() {
		return time.Time{}, false
	}
	s.unusedSince = now
	return now.Add(Linger), true
}

// Expire drops the space if it has been unused for Linger at now; if it
// is unused for less, it returns when to look again.
func (s *Space[V]) Expire(now time.Time) (again time.Time, wait bool) {
	if !s.active || len(s.regioned.items) > 0 || s.unusedSince.IsZero() {
		return time.Time{}, false
	}
	if drop := s.unusedSince.Add(Linger); now.Before(drop) {
		return drop, true
	}
	*s = Space[V]{Props: s.Props, Grid: s.Grid, Margin: s.Margin}
	return time.Time{}, false
}

// roster is a set of viewers as a list, for visiting in any order and
// taking one out in constant time.
type roster[V comparable] struct {
	items []V
	at    map[V]int // where each is in items
}

func rosterOf[K comparable, V comparable](m map[K]*roster[V], k K) *roster[V] {
	l := m[k]
	if l == nil {
		l = &roster[V]{}
		m[k] = l
	}
	return l
}

// list returns the viewers of l, which may be nil (none).
func (l *roster[V]) list() []V {
	if l == nil {
		return nil
	}
	return l.items
}

func (l *roster[V]) add(v V) {
	if l.at == nil {
		l.at = map[V]int{}
	} else if _, ok := l.at[v]; ok {
		return
	}
	l.at[v] = len(l.items)
	l.items = append(l.items, v)
}

// remove takes v out, the last one taking its place, and reports whether
// it was there.
func (l *roster[V]) remove(v V) bool {
	i, ok := l.at[v]
	if !ok {
		return false
	}
	last := len(l.items) - 1
	moved := l.items[last]
	l.items[i] = moved
	l.at[moved] = i
	var zero V
	l.items[last] = zero
	l.items = l.items[:last]
	delete(l.at, v)
	return true
}
