package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Interest (its geometry and object index are package interest's). A
// downstream or mesh peer may announce a region (metadata key
// "interest"): it is then sent only objects whose position is inside it,
// objects without a position, and removes of what leaves it. Hysteresis:
// an object enters at the region's boxes and leaves only beyond them
// grown by Options.InterestMargin. A uniform grid indexes objects and
// regions by cell, so that routing a change visits only the links
// interested in the cells it leaves and enters, and a region change only
// the objects of the old and new regions.

// Defaults of the interest options.
const (
	DefaultInterestProperty = "position"
	DefaultInterestMargin   = 2.0
	DefaultInterestCell     = 32.0
)

// space is the node's interest state: the index, and when regions
// announced too soon after their last change are applied.
type space struct {
	spatial
	// timer applies the regions links announced too soon after their
	// last change and drops an unused index (regionsDue); it fires at
	// timerAt, zero when it is not set.
	timer   *time.Timer
	timerAt time.Time
	// revealHook, if set (by tests), runs with n.mu held after each
	// slice of a region change taken a slice at a time
	// (continueRevealLocked).
	revealHook func(done bool)
}

// spatial is the node's interest index. Guarded by Node.mu. It is built
// when the first link announces a region and dropped with the last.
type spatial struct {
	active bool
	// objects are the world's objects by cell.
	objects  interest.Index
	links    map[interest.Cell][]*linkState
	wide     []*linkState
	regioned []*linkState
	// boxed are the regions with boxes (in links or wide); roomOnly those
	// of rooms alone, also listed by room in roomLinks (rooms.go).
	boxed     []*linkState
	roomOnly  []*linkState
	roomLinks map[string][]*linkState
	// unusedSince is when the last region went, while none has come
	// since: the index lingers (spatialLinger).
	unusedSince time.Time
}

// spatialLinger is how long the index outlives the last region. Building
// it visits the whole world: a region that comes and goes (a node's whole
// interest when its last local client leaves and another comes, a bridge
// whose only client reconnects) must not cost that each time.
const spatialLinger = 30 * time.Second

// regionGoneLocked notes that a link's region went: the index, unused
// from now on, goes once it has lingered. n.mu must be held.
func (n *Node) regionGoneLocked() {
	if sp := &n.sp; sp.active && len(sp.regioned) == 0 && sp.unusedSince.IsZero() {
		sp.unusedSince = time.Now()
		n.regionTimerLocked(sp.unusedSince.Add(spatialLinger))
	}
}

// region is a link's announced interest.
type region struct {
	boxes []peer.Box
	// hasBoxes is false when the region is rooms only (rooms.go): it
	// holds all of space.
	hasBoxes bool
	// rooms are the rooms whose objects the region holds, with the
	// objects of no room; nil means every room.
	rooms map[string]bool
	// none: the region of an attachment that wants nothing (a bridge
	// serving no one): it holds no object at all, placed or not, and is
	// not indexed, so that a node whose only region is an idle bridge's
	// keeps no spatial index.
	none  bool
	cells []interest.Cell // cells registered, unless wide
	wide  bool
	// sub lists the log entries of this flush the link must consider;
	// mark dedupes them.
	sub  []int
	mark int
}

// positionOf reads an object's position property.
func (n *Node) positionOf(props gameworld.Properties) ([3]float64, bool) {
	return interest.ParseVec3(props.Value(n.opts.InterestProperty))
}

// grid is the node's interest grid.
func (n *Node) grid() interest.Grid { return interest.Grid{Size: n.opts.InterestCell} }

// activateSpatial builds the object index from the world. n.mu must be
// held.
func (n *Node) activateSpatial() {
	sp := &n.sp
	if sp.active {
		return
	}
	sp.spatial = spatial{active: true, links: map[interest.Cell][]*linkState{}, roomLinks: map[string][]*linkState{}}
	n.world.Range(func(o gameworld.Object) bool {
		n.placeLocked(o.Slot, o.ID, o.Properties)
		return true
	})
}

// placeLocked records an object's position (props zero: removed) and
// returns where it was, and its position now. n.mu must be held.
func (n *Node) placeLocked(slot uint32, id string, props gameworld.Properties) (old interest.Place, p [3]float64) {
	var now interest.Place
	if !props.IsZero() {
		now = interest.Place{ID: id, Room: n.roomOf(props), In: true}
		if p, now.HasP = n.positionOf(props); now.HasP {
			now.Cell = n.grid().Of(p)
		}
	}
	return n.sp.objects.Put(slot, now), p
}

// registerLocked (re)registers ls's region in the grid. n.mu must be held.
func (n *Node) registerLocked(ls *linkState) {
	sp := &n.sp
	n.unregisterLocked(ls)
	if ls.region == nil {
		return
	}
	if ls.region.none {
		// Not indexed; a change from or to it looks at the whole world.
		ls.region.wide = true
		return
	}
	sp.regioned = append(sp.regioned, ls)
	sp.unusedSince = time.Time{}
	if !ls.region.hasBoxes {
		// Rooms alone: listed by room. It holds all of space, so a
		// change of it looks at the whole world (wide).
		ls.region.wide = true
		sp.roomOnly = append(sp.roomOnly, ls)
		for r := range ls.region.rooms {
			sp.roomLinks[r] = append(sp.roomLinks[r], ls)
		}
		return
	}
	sp.boxed = append(sp.boxed, ls)
	cells, ok := n.grid().Cover(ls.region.boxes, n.opts.InterestMargin)
	ls.region.cells, ls.region.wide = cells, !ok
	if !ok {
		sp.wide = append(sp.wide, ls)
	}
	for _, c := range cells {
		sp.links[c] = append(sp.links[c], ls)
	}
	sp.unusedSince = time.Time{}
}

func (n *Node) unregisterLocked(ls *linkState) {
	sp := &n.sp
	if !sp.active || ls.region == nil {
		return
	}
	drop := func(list []*linkState) []*linkState {
		for i, x := range list {
			if x == ls {
				return append(list[:i:i], list[i+1:]...)
			}
		}
		return list
	}
	for _, c := range ls.region.cells {
		if l := drop(sp.links[c]); len(l) > 0 {
			sp.links[c] = l
		} else {
			delete(sp.links, c)
		}
	}
	sp.wide = drop(sp.wide)
	sp.regioned = drop(sp.regioned)
	sp.boxed = drop(sp.boxed)
	sp.roomOnly = drop(sp.roomOnly)
	for r := range ls.region.rooms {
		if l := drop(sp.roomLinks[r]); len(l) > 0 {
			sp.roomLinks[r] = l
		} else {
			delete(sp.roomLinks, r)
		}
	}
	ls.region.cells = nil
}

// regionVerdict refines an ownership verdict by ls's region for the log's
// i-th entry. n.mu must be held.
func (n *Node) regionVerdict(ls *linkState, i int, v peer.Verdict) peer.Verdict {
	return n.regionVerdictOf(ls, &n.fan.log[i], v)
}

// regionVerdictOf is regionVerdict for log entry e.
func (n *Node) regionVerdictOf(ls *linkState, e *logEntry, v peer.Verdict) peer.Verdict {
	if v != peer.Send || ls.region == nil {
		return v
	}
	if e.rec.Type == gameworld.Remove {
		return peer.Send
	}
	if r := ls.region; r.rooms != nil && e.room != "" && !r.rooms[e.room] {
		return peer.Hide
	}
	if !e.hasP || !ls.region.hasBoxes {
		return peer.Send
	}
	switch {
	case interest.Contains(ls.region.boxes, e.p, 0):
		return peer.Send
	case interest.Contains(ls.region.boxes, e.p, n.opts.InterestMargin):
		return peer.Keep
	}
	return peer.Hide
}

// indexLog places the log's objects in the index and lists, for every
// link with a region, the entries it must consider: those in cells its
// region covers, before or after the change, those without a position,
// and every remove. n.mu must be held.
func (n *Node) indexLog() {
	sp := &n.sp
	if !sp.active {
		return
	}
	f := &n.fan
	for _, ls := range sp.regioned {
		ls.region.sub, ls.region.mark = ls.region.sub[:0], 0
	}
	visit := func(ls *linkState, i int) {
		if ls.region.mark != i+1 {
			ls.region.mark = i + 1
			ls.region.sub = append(ls.region.sub, i)
		}
	}
	for i := range f.log {
		e := &f.log[i]
		var props gameworld.Properties
		if e.rec.Type != gameworld.Remove {
			props = e.after
			if props.IsZero() {
				props = e.rec.Properties
			}
		}
		old, p := n.placeLocked(e.rec.Slot, e.rec.ID, props)
		now := sp.objects.Get(e.rec.Slot)
		e.p, e.hasP, e.room = p, now.HasP, now.Room
		if e.rec.Type == gameworld.Remove {
			// Every link with a region considers every remove: one may
			// know the object outside its cells (a sliced hide after its
			// region changed has not reached it yet), and must be told
			// it went; otherwise the slot, reused, would pass for known
			// and the next object there never be revealed to it. A link
			// that does not know it drops the remove at once.
			for _, ls := range sp.regioned {
				visit(ls, i)
			}
			continue
		}
		if len(sp.roomOnly) > 0 {
			n.visitRooms(old, now, func(ls *linkState) { visit(ls, i) })
		}
		if (old.In && !old.HasP) || (now.In && !now.HasP) {
			for _, ls := range sp.boxed {
				visit(ls, i)
			}
			continue
		}
		if old.In {
			for _, ls := range sp.links[old.Cell] {
				visit(ls, i)
			}
		}
		if now.In {
			for _, ls := range sp.links[now.Cell] {
				visit(ls, i)
			}
		}
		for _, ls := range sp.wide {
			visit(ls, i)
		}
	}
}

// unionInterestLocked returns the union of the regions of the node's
// downstream peers (links and attachments), for its upstream and mesh
// links: has is false if any of them wants everything. n.mu must be held.
func (n *Node) unionInterestLocked() (boxes []peer.Box, has bool) {
	boxes = []peer.Box{}
	add := func(ls *linkState) bool {
		if ls.region == nil || !ls.region.hasBoxes {
			return false // all of space (in some rooms, or all)
		}
		boxes = append(boxes, ls.region.boxes...)
		return true
	}
	if !n.eachDownstreamLocked(add) || len(boxes) > peer.MaxInterestBoxes {
		return nil, false // too detailed to announce: everything
	}
	return boxes, true
}

// eachDownstreamLocked calls fn with every downstream peer whose wants
// count (links and attachments), until fn returns false, and reports
// whether none did. n.mu must be held.
func (n *Node) eachDownstreamLocked(fn func(*linkState) bool) bool {
	for _, ls := range n.hub.order {
		// A peer that has not said who it is wants nothing yet: its
		// region (or lack of one) counts once its metadata arrives.
		if ls.kind == ownership.Downstream && ls.ready && !fn(ls) {
			return false
		}
	}
	for _, a := range n.hub.atts {
		if a.rx != nil && !fn(a.ls) {
			return false
		}
	}
	return true
}
