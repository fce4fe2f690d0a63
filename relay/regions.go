package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Region changes: a peer announces what it wants to see (interest,
// rooms), at most every regionEvery; what enters its view is revealed
// whole and what leaves it hidden, a slice at a time in a big world.

// setRegionLocked sets what ls wants to see (v.Everything(): all of it).
// A ready link is sent what enters its view and removes of what leaves
// it. n.mu must be held.
func (n *Node) setRegionLocked(ls *linkState, v interest.Wants) {
	old := ls.region
	has := !v.Everything()
	if !has && old == nil {
		return
	}
	// A link that knows nothing yet (its peer has just said who it is,
	// or waits for a refresh) is told nothing now: the next flush offers
	// it the log by its new region, and the refresh that follows the
	// rest. Flushing for it too, a crowd arriving with regions would have
	// the node offer every link its log once per joiner.
	scans := ls.ready && !(ls.refreshWanted && !ls.knowsAny())
	if scans && len(n.fan.log) > 0 {
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
	if !ls.sched {
		// What it is owed, under the region it had. (What is pending on
		// the shared schedule reaches it by its new region: every band
		// is published to within 2^(bands-1) ticks.)
		n.sendOwedLocked(ls, "")
	}
	var oldCells []interest.Cell
	oldWide := false
	if old != nil {
		oldCells, oldWide = old.Cells(), old.Wide()
	}
	none := ls.att != nil && v.HasBoxes && len(v.Boxes) == 0 && v.Rooms == nil
	if has && !none {
		n.activateSpatial()
	}
	n.unregisterLocked(ls)
	if has {
		ls.region = &region{Region: interest.Region{Wants: v, None: none}}
		n.registerLocked(ls)
	} else {
		ls.region = nil
	}
	n.regionGoneLocked()
	if !scans {
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
	case (old == nil || !has || oldWide || ls.region.Wide()) && ls.att == nil && n.opts.Tick != peer.Immediate && n.world.Len() > refreshSlice:
		// The whole world to look at, and a big one: a slice at a time,
		// the lock let go between (continueRevealLocked), as for a
		// refresh answer. A mesh member whose first client arrives while
		// a flood comes in would otherwise hold the node for a tenth of
		// a second or more, everyone's changes and handshakes waiting.
		ls.revealing, ls.revealAt = true, 0
		n.continueRevealLocked(ls)
		return
	case old == nil || !has || oldWide || ls.region.Wide():
		may := n.mayFilterLocked(ls)
		n.world.Range(func(o gameworld.Object) bool {
			if may(o.Owner) {
				objs = append(objs, o)
			}
			return true
		})
	default:
		seen := map[uint32]bool{}
		objects := n.sp.Objects()
		for _, cells := range [][]interest.Cell{oldCells, ls.region.Cells()} {
			for _, c := range cells {
				objects.InCell(c, func(slot uint32) bool {
					if !seen[slot] {
						seen[slot] = true
						if o, ok := n.world.Get(objects.Get(slot).ID); ok {
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
		recs = append(recs, n.wholeOf(o))
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
	v interest.Wants
}

// interestChangedLocked applies the region a peer announced in its
// metadata, or keeps it for later if the link's region changed too
// recently, and reports whether it was applied (so the union of regions
// changed). n.mu must be held.
func (n *Node) interestChangedLocked(ls *linkState, md peer.Metadata) bool {
	v := interest.WantsOf(md)
	switch {
	case v.Same(regionOf(ls)):
		ls.wanted = nil // back to what applies: nothing to change
		return false
	case ls.wanted != nil && ls.wanted.v.Equal(v):
		return false
	}
	// (An attachment's region is set by its bridge, at the pace its own
	// peers come and go: it applies at once, as does a link's first.)
	now := time.Now()
	if !ls.ready || ls.att != nil || (n.opts.Tick == peer.Immediate && !now.Before(ls.regionNext)) {
		ls.wanted = nil
		n.applyRegionLocked(ls, v)
		return true
	}
	// A ready link's new region applies at the end of a flush, once the
	// link has been offered the log by the region it had: applied now, it
	// would take a flush of every link's log first, and a crowd walking
	// about, each peer's region following it, would have the node flush
	// once per step of each.
	ls.wanted = &wantedRegion{v: v}
	if n.opts.Tick == peer.Immediate || now.Before(ls.regionNext) {
		n.regionTimerLocked(ls.regionNext)
	} else {
		n.sp.due = true
	}
	return false
}

// applyDueRegionsLocked applies the regions links announced whose time
// has come, but those of the links in b (offered the last flush's log
// outside n.mu, yet to come: theirs wait for the next flush), and sets
// the region timer for the others. n.mu must be held.
func (n *Node) applyDueRegionsLocked(b *batch) {
	n.sp.due = false
	now := time.Now()
	changed := false
	for k, ls := range n.hub.order {
		w := ls.wanted
		switch {
		case w == nil:
		case b != nil && k < len(b.picked) && b.picked[k]:
			n.sp.due = true
		case now.Before(ls.regionNext):
			n.regionTimerLocked(ls.regionNext)
		default:
			ls.wanted = nil
			n.applyRegionLocked(ls, w.v)
			changed = true
		}
	}
	if changed {
		n.chainChanged() // the union announced upstream and to the mesh
	}
}

// applyRegionLocked sets ls's region and when it may change next. n.mu
// must be held.
func (n *Node) applyRegionLocked(ls *linkState, v interest.Wants) {
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

// regionsDue runs on the region timer: it has the next flush apply the
// kept regions whose time has come (or applies them, in a node without a
// tick), drops an index unused for interest.Linger, and sets the
// timer for what is left.
func (n *Node) regionsDue() {
	n.lock()
	defer n.mu.Unlock()
	n.sp.timerAt = time.Time{}
	if n.life.closed {
		return
	}
	now := time.Now()
	if n.opts.Tick == peer.Immediate {
		n.applyDueRegionsLocked(nil)
	} else {
		// The next flush applies them.
		for _, ls := range n.hub.order {
			if ls.wanted != nil {
				n.sp.due = true
				break
			}
		}
	}
	if again, wait := n.sp.Expire(now); wait {
		n.regionTimerLocked(again)
	}
}

// SetInterest sets the region a client node wants of its upstream; nil
// means everything. The upstream is told at once.
func (n *Node) SetInterest(boxes []peer.Box) {
	n.lock()
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
	n.lock()
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
		n.sp.InRegion(&r.Region, func(_ uint32, id string) bool {
			o, ok := n.world.Get(id)
			return !ok || fn(o)
		})
	}
}
