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

// setRegionLocked sets what ls wants to see (v.everything: all of it).
// A ready link is sent what enters its view and removes of what leaves
// it. n.mu must be held.
func (n *Node) setRegionLocked(ls *linkState, v wants) {
	old := ls.region
	has := !v.everything()
	if !has && old == nil {
		return
	}
	if len(n.fan.log) > 0 {
		// Changes not yet flushed are not in the index, and would be
		// routed by the new region from cells the scan below did not
		// visit: a remove pending for an object the link was sent would
		// never reach it, an object that moved in would not be revealed.
		// And the scan below names objects by the slots they hold now,
		// while what the link knows is by the slots of what it was sent:
		// an object removed and another put in its slot within the tick
		// would be taken one for the other, and the first's remove lost
		// (a bridge kept it for good). Flushing first makes the index and
		// what the link knows the world.
		n.flushLocked()
	}
	var oldCells []interest.Cell
	oldWide := false
	if old != nil {
		oldCells, oldWide = old.cells, old.wide
	}
	none := ls.att != nil && v.hasBoxes && len(v.boxes) == 0 && v.rooms == nil
	if has && !none {
		n.activateSpatial()
	}
	n.unregisterLocked(ls)
	if has {
		ls.region = v.region()
		ls.region.none = none
		n.registerLocked(ls)
	} else {
		ls.region = nil
	}
	n.regionGoneLocked()
	if !ls.ready || (ls.refreshWanted && !ls.knowsAny()) {
		// The refresh to come respects the region. (A peer that holds
		// objects already, one that asked for a refresh again, say, must
		// still be told what left: a refresh answer only adds.)
		return
	}
	// Objects of the old and new regions: what enters the view comes
	// whole, what leaves it goes. Only those the link may be sent are
	// looked at: a mesh member's interest that widens in a world of
	// 100,000 objects, nearly none of them for it, must not take the
	// node's lock for a copy and sort of them all.
	ls.revealing = false
	var objs []gameworld.Object
	switch {
	case (old == nil || !has || oldWide || ls.region.wide) && ls.att == nil && n.opts.Tick != peer.Immediate && n.world.Len() > refreshSlice:
		// The whole world to look at, and a big one: a slice at a time,
		// the lock let go between (continueRevealLocked), as for a
		// refresh answer. A mesh member whose first client arrives while
		// a flood comes in would otherwise hold the node for a tenth of
		// a second or more, everyone's changes and handshakes waiting.
		ls.revealing, ls.revealAt = true, 0
		n.continueRevealLocked(ls)
		return
	case old == nil || !has || oldWide || ls.region.wide:
		may := n.mayFilterLocked(ls)
		n.world.Range(func(o gameworld.Object) bool {
			if may(o.Owner) {
				objs = append(objs, o)
			}
			return true
		})
	default:
		seen := map[uint32]bool{}
		for _, cells := range [][]interest.Cell{oldCells, ls.region.cells} {
			for _, c := range cells {
				n.sp.objects.InCell(c, func(slot uint32) bool {
					if !seen[slot] {
						seen[slot] = true
						if o, ok := n.world.Get(n.sp.objects.Get(slot).ID); ok {
							objs = append(objs, o)
						}
					}
					return true
				})
			}
		}
	}
	n.revealLocked(ls, objs)
}

// mayFilterLocked returns whether ls may be sent an owner's objects, by
// ownership: only those are looked at when a region changes (a mesh
// member's interest that widens in a world of 100,000 objects, nearly
// none of them for it, must not take the node's lock for a copy of them
// all). n.mu must be held.
func (n *Node) mayFilterLocked(ls *linkState) func(owner string) bool {
	return n.ownerFilter(ls, func(ls *linkState, owner string) bool {
		return ownership.MaySend(n.role, ls.kind, n.relation(ls, owner))
	})
}

// revealLocked offers ls, of objs, what enters its region whole and the
// removes of what leaves it. n.mu must be held.
func (n *Node) revealLocked(ls *linkState, objs []gameworld.Object) {
	may := n.mayFilterLocked(ls)
	recs := make([]*peer.Record, 0, len(objs))
	verdicts := make([]peer.Verdict, 0, len(objs))
	for _, o := range objs {
		if !may(o.Owner) {
			continue
		}
		v := peer.Reveal
		if r := ls.region; r != nil {
			switch {
			case n.holds(r, o.Properties, 0):
			case n.holds(r, o.Properties, n.opts.InterestMargin):
				continue // near the edge: stays as it is
			default:
				v = peer.Hide
			}
		}
		if v == peer.Reveal && n.departingLocked(o.Owner) != nil {
			// As good as gone (departures.go): not sent now, and a peer
			// told of the departure would take it for the world's
			// return and keep it.
			continue
		}
		recs = append(recs, wholeRecord(o))
		verdicts = append(verdicts, v)
	}
	if len(recs) > 0 {
		ls.endpointOffer(recs, func(i int) peer.Verdict { return verdicts[i] })
	}
}

// continueRevealLocked offers ls the next slice of the world for its new
// region, from the world as it is now: what changed in slots passed went
// with the log under the new region already (an update of an object the
// peer lacks arrives whole), what changes in slots to come is looked at
// as it is when its slice comes. It asks for the next flush at once if
// there is more. n.mu must be held.
func (n *Node) continueRevealLocked(ls *linkState) {
	may := n.mayFilterLocked(ls)
	objs := make([]gameworld.Object, 0, refreshSlice)
	next, done := n.world.RangeFrom(ls.revealAt, func(o gameworld.Object) bool {
		if may(o.Owner) {
			objs = append(objs, o)
		}
		return len(objs) < refreshSlice
	})
	ls.revealAt = next
	n.revealLocked(ls, objs)
	if n.sp.revealHook != nil {
		n.sp.revealHook(done)
	}
	if done {
		ls.revealing = false
		return
	}
	// The next flush goes on (refreshes: also when this slice was not
	// taken in a flush, but when the region changed).
	n.fan.moreRefresh, n.fan.refreshes = true, true
	n.kickLocked()
}

// knowsAny reports whether the peer of ls holds (or is about to) any
// object. n.mu must be held.
func (ls *linkState) knowsAny() bool {
	if ls.att != nil {
		return len(ls.att.seen) > 0
	}
	return ls.link.KnowsAny()
}

// endpointOffer offers records with verdicts to a link or attachment.
func (ls *linkState) endpointOffer(recs []*peer.Record, verdict func(int) peer.Verdict) {
	if ls.att != nil {
		ls.att.offer(recs, verdict, nil)
		return
	}
	ls.link.Offer(recs, verdict, nil, false)
}

// regionVerdict refines an ownership verdict by ls's region for the log's
// i-th entry. n.mu must be held.
func (n *Node) regionVerdict(ls *linkState, i int, v peer.Verdict) peer.Verdict {
	if v != peer.Send || ls.region == nil {
		return v
	}
	e := &n.fan.log[i]
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

// regionEvery is how often at most a link's region changes: changing it
// visits every object of the old and new regions (all of the world for a
// wide one), so a peer that announces regions faster than that has only
// the latest applied, once regionEvery has passed since the last change
// ended, or twice what that change took if longer.
// Otherwise a peer flipping its region at a few dozen hertz over a big
// world keeps the node's lock busy, and its own link's reader falls
// behind what it sent, pongs included, for as long as it goes on.
const regionEvery = 100 * time.Millisecond

// wantedRegion is a region announced and not yet applied.
type wantedRegion struct {
	v wants
}

// interestChangedLocked applies the region a peer announced in its
// metadata, or keeps it for later if the link's region changed too
// recently, and reports whether it was applied (so the union of regions
// changed). n.mu must be held.
func (n *Node) interestChangedLocked(ls *linkState, md peer.Metadata) bool {
	v := wantsOf(md)
	switch {
	case v.same(ls.region):
		ls.wanted = nil // back to what applies: nothing to change
		return false
	case ls.wanted != nil && ls.wanted.v.equal(v):
		return false
	}
	// (An attachment's region is set by its bridge, at the pace its own
	// peers come and go: it applies at once, as does a link's first.)
	if !ls.ready || ls.att != nil || !time.Now().Before(ls.regionNext) {
		ls.wanted = nil
		n.applyRegionLocked(ls, v)
		return true
	}
	ls.wanted = &wantedRegion{v: v}
	n.regionTimerLocked(ls.regionNext)
	return false
}

// applyRegionLocked sets ls's region and when it may change next. n.mu
// must be held.
func (n *Node) applyRegionLocked(ls *linkState, v wants) {
	start := time.Now()
	n.setRegionLocked(ls, v)
	end := time.Now()
	ls.regionNext = end.Add(max(regionEvery, 2*end.Sub(start)))
}

// regionTimerLocked makes the region timer fire at the latest at at: it
// applies the regions kept by interestChangedLocked and drops an unused
// index, on a timer of its own rather than the tick loop, which a node
// that sends at once (peer.Immediate) has not. n.mu must be held.
func (n *Node) regionTimerLocked(at time.Time) {
	if n.sp.timer != nil && !n.sp.timerAt.IsZero() && !at.Before(n.sp.timerAt) {
		return // it fires soon enough
	}
	n.sp.timerAt = at
	if n.sp.timer == nil {
		n.sp.timer = time.AfterFunc(time.Until(at), n.regionsDue)
		return
	}
	n.sp.timer.Reset(time.Until(at))
}

// regionsDue runs on the region timer: it applies the kept regions whose
// time has come, drops an index unused for spatialLinger, and sets the
// timer for what is left.
func (n *Node) regionsDue() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sp.timerAt = time.Time{}
	if n.life.closed {
		return
	}
	now := time.Now()
	changed := false
	for _, ls := range n.hub.order {
		w := ls.wanted
		if w == nil {
			continue
		}
		if now.Before(ls.regionNext) {
			n.regionTimerLocked(ls.regionNext)
			continue
		}
		ls.wanted = nil
		n.applyRegionLocked(ls, w.v)
		changed = true
	}
	if changed {
		n.chainChanged() // the union announced upstream and to the mesh
	}
	if sp := &n.sp; sp.active && len(sp.regioned) == 0 && !sp.unusedSince.IsZero() {
		if drop := sp.unusedSince.Add(spatialLinger); now.Before(drop) {
			n.regionTimerLocked(drop)
		} else {
			n.sp.spatial = spatial{}
		}
	}
}

// SetInterest sets the region a client node wants of its upstream; nil
// means everything. The upstream is told at once.
func (n *Node) SetInterest(boxes []peer.Box) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if boxes != nil {
		boxes = append([]peer.Box{}, boxes...)
	}
	n.up.interest = boxes
	n.chainChanged()
}

// SetInterest sets what the attachment receives, as a link's announced
// region would (boxes nil with has false: everything), except that has
// with no boxes means nothing at all, objects without a position
// included, and costs the node no spatial index. Bridges set nothing
// while they serve no one, so that a node's upstream and mesh peers need
// not send them the world, and the node keeps no index for them.
func (a *Attachment) SetInterest(boxes []peer.Box, has bool) {
	n := a.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if !a.attached() {
		return
	}
	if n.interestChangedLocked(a.ls, peer.Metadata{Interest: boxes, HasInterest: has}) {
		n.chainChanged()
	}
}

// regionObjects returns a function that calls fn with every object in
// the cells of r and every object without a position: a superset of what
// r holds, found in time proportional to it. n.mu must be held.
func (n *Node) regionObjects(r *region) func(fn func(gameworld.Object) bool) {
	return func(fn func(gameworld.Object) bool) {
		visit := func(slot uint32) bool {
			o, ok := n.world.Get(n.sp.objects.Get(slot).ID)
			return !ok || fn(o)
		}
		for _, c := range r.cells {
			if !n.sp.objects.InCell(c, visit) {
				return
			}
		}
		n.sp.objects.Unplaced(visit)
	}
}
