package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
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

// space is the node's interest state: the index of objects and regions
// (built when the first link announces a region, dropped some time after
// the last one went), and when regions announced too soon after their
// last change are applied. Guarded by Node.mu.
type space struct {
	interest.Space[*linkState]
	// timer applies the regions links announced too soon after their
	// last change and drops an unused index (regionsDue); it fires at
	// timerAt, zero when it is not set.
	timer   *time.Timer
	timerAt time.Time
	// due is set when some link's kept region may apply at the next
	// flush's end (applyDueRegionsLocked).
	due bool
	// revealHook, if set (by tests), runs with n.mu held after each
	// slice of a region change taken a slice at a time
	// (continueRevealLocked).
	revealHook func(done bool)
}

// regionGoneLocked notes that a link's region went: the index, unused
// from now on, goes once it has lingered. n.mu must be held.
func (n *Node) regionGoneLocked() {
	if drop, ok := n.sp.Unused(time.Now()); ok {
		n.regionTimerLocked(drop)
	}
}

// region is a link's announced interest, with what the flush keeps of it:
// sub lists the log entries of this flush the link must consider; mark
// dedupes them.
type region struct {
	interest.Region
	sub  []int
	mark int
	// recs is offerSubset's buffer, dueRecs, dueVerdicts and dueBits
	// duesLocked's, dueIn the verdicts of the dues offered with the log;
	// all kept from flush to flush.
	recs        []*peer.Record
	dueRecs     []*peer.Record
	dueVerdicts []peer.Verdict
	dueBits     []uint64
	dueIn       []peer.Verdict
	// nearBuf and nearSub are nearby.subOf's.
	nearBuf, nearSub []int
}

// activateSpatial builds the object index from the world. n.mu must be
// held.
func (n *Node) activateSpatial() {
	n.sp.Activate(func(fn func(uint32, string, gameworld.Properties) bool) {
		n.world.Range(func(o gameworld.Object) bool { return fn(o.Slot, o.ID, o.Properties) })
	})
}

// regionOf is ls's region as the index registers it; nil when ls wants
// everything.
func regionOf(ls *linkState) *interest.Region {
	if ls.region == nil {
		return nil
	}
	return &ls.region.Region
}

// registerLocked (re)registers ls's region in the index. n.mu must be
// held.
func (n *Node) registerLocked(ls *linkState) { n.sp.Register(ls, regionOf(ls)) }

// unregisterLocked takes ls's region out of the index. n.mu must be held.
func (n *Node) unregisterLocked(ls *linkState) { n.sp.Unregister(ls, regionOf(ls)) }

// regionVerdict refines an ownership verdict by ls's region for the log's
// i-th entry. n.mu must be held.
func (n *Node) regionVerdict(ls *linkState, i int, v peer.Verdict) peer.Verdict {
	return n.regionVerdictOf(ls, &n.fan.log[i], v)
}

// regionVerdictOf is regionVerdict for log entry e. A remove's spot is
// zero (indexLog), which a region sends. (Small enough to inline: the
// flush asks it for every entry a region link considers.)
func (n *Node) regionVerdictOf(ls *linkState, e *logEntry, v peer.Verdict) peer.Verdict {
	if r := ls.region; v == peer.Send && r != nil {
		return r.Verdict(&e.spot, n.opts.InterestMargin)
	}
	return v
}

// indexLog places the log's objects in the index and lists, for every
// link with a region, the entries it must consider: those in cells its
// region covers, before or after the change, those without a position,
// and every remove; for a wide region, every entry. n.mu must be held.
func (n *Node) indexLog() {
	sp := &n.sp
	if !sp.Active() {
		return
	}
	f := &n.fan
	for _, ls := range sp.Regioned() {
		ls.region.sub, ls.region.mark = ls.region.sub[:0], 0
	}
	visit := func(ls *linkState, i int) {
		if ls.region.mark != i+1 {
			ls.region.mark = i + 1
			ls.region.sub = append(ls.region.sub, i)
		}
	}
	cur := 0
	visitCur := func(ls *linkState) { visit(ls, cur) } // one closure for the whole log
	for i := range f.log {
		cur = i
		e := &f.log[i]
		var props gameworld.Properties
		if e.rec.Type != gameworld.Remove {
			props = e.after
			if props.IsZero() {
				props = e.rec.Properties
			}
		}
		old, now, p := sp.Place(e.rec.Slot, e.rec.ID, props)
		e.spot = interest.Spot{P: p, HasP: now.HasP, Room: now.Room}
		if e.rec.Type == gameworld.Remove {
			// Every link with a region considers every remove: one may
			// know the object outside its cells (a sliced hide after its
			// region changed has not reached it yet), and must be told
			// it went; otherwise the slot, reused, would pass for known
			// and the next object there never be revealed to it. A link
			// that does not know it drops the remove at once.
			for _, ls := range sp.Regioned() {
				visit(ls, i)
			}
			continue
		}
		sp.Visit(old, now, visitCur)
	}
	if wide := sp.Wide(); len(wide) > 0 {
		// Every entry concerns a wide region: a copy of the whole log's
		// positions, rather than a visit of each entry for each of them
		// (a crowd whose regions hold everyone is a thousand of them).
		f.every = f.every[:0]
		for i := range f.log {
			f.every = append(f.every, i)
		}
		for _, ls := range wide {
			ls.region.sub = append(ls.region.sub[:0], f.every...)
		}
	}
}

// unionInterestLocked returns the union of the regions of the node's
// downstream peers (links and attachments), for its upstream and mesh
// links: has is false if any of them wants everything. n.mu must be held.
func (n *Node) unionInterestLocked() (boxes []peer.Box, has bool) {
	boxes = []peer.Box{}
	add := func(ls *linkState) bool {
		if ls.region == nil || !ls.region.HasBoxes {
			return false // all of space (in some rooms, or all)
		}
		boxes = append(boxes, ls.region.Boxes...)
		return true
	}
	if !n.hub.downstream(add) {
		return nil, false
	}
	// More regions than one metadata may name: a cover of them, a little
	// more than they hold rather than the whole world.
	return interest.Coarsen(boxes, peer.MaxInterestBoxes, n.opts.InterestCell), true
}
