package relay

import (
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Refresh answers: every object a peer may receive, as full adds, then
// the refreshed marker; in a big world a slice per turn of the lock.

// wantRefresh makes the next flush send ls every object it may receive, as
// full adds, then mark the answer complete. Answering in the flush, after
// the log, keeps what the link knows in order with what it is sent. n.mu
// must be held.
func (n *Node) wantRefresh(ls *linkState) {
	ls.refreshWanted = true
	n.fan.refreshes = true
	if n.opts.Tick == peer.Immediate {
		n.flushLocked()
	}
}

// refreshSlice is how many objects a refresh answer takes from the world
// per turn of the node's lock, when the world is bigger: a peer joining a
// world of 100,000 objects would otherwise hold the node for a tenth of a
// second or more, everyone else's changes and handshakes waiting.
const refreshSlice = 8192

// sendRefreshLocked offers ls every object it may receive as a full add,
// then marks the refresh complete: at once, or a slice at a time in a big
// world (continueRefreshLocked). n.mu must be held.
func (n *Node) sendRefreshLocked(ls *linkState) {
	n.sendOwedLocked(ls, "")
	ls.refreshing = false
	if ls.att == nil && ls.region == nil && n.opts.Tick != peer.Immediate && n.world.Len() > refreshSlice {
		ls.refreshing, ls.refreshAt = true, 0
		n.continueRefreshLocked(ls)
		return
	}
	var recs []*peer.Record
	each := n.world.Range
	if ls.region != nil && !ls.region.Wide() && n.sp.Active() {
		each = n.regionObjects(ls.region)
	}
	each(func(o gameworld.Object) bool {
		if ls.region != nil && !n.holds(ls.region, o.Properties, 0) {
			return true
		}
		if n.departingLocked(o.Owner) != nil {
			return true // as good as gone (departures.go)
		}
		if ownership.MaySend(n.role, ls.kind, n.relation(ls, o.Owner)) {
			recs = append(recs, n.wholeOf(o))
		}
		return true
	})
	if ls.att != nil {
		ls.att.offer(recs, nil, nil)
		return
	}
	ls.link.Offer(recs, func(int) peer.Verdict { return peer.Send }, nil, false)
	ls.link.MarkRefreshed()
}

// continueRefreshLocked offers ls the next slice of its refresh answer,
// from the world as it is now (what changed in slots passed already went
// with the log, as to any peer; what changed in slots to come goes in its
// slice, current), and asks for the next flush at once if there is more;
// the last slice marks the answer complete. n.mu must be held.
func (n *Node) continueRefreshLocked(ls *linkState) {
	recs := make([]*peer.Record, 0, refreshSlice)
	next, done := n.world.RangeFrom(ls.refreshAt, func(o gameworld.Object) bool {
		if n.departingLocked(o.Owner) != nil {
			return true // as good as gone (departures.go)
		}
		if ls.region != nil && !n.holds(ls.region, o.Properties, 0) {
			return true // (a region that came meanwhile)
		}
		if ownership.MaySend(n.role, ls.kind, n.relation(ls, o.Owner)) {
			recs = append(recs, n.wholeOf(o))
		}
		return len(recs) < refreshSlice
	})
	ls.refreshAt = next
	ls.link.Offer(recs, func(int) peer.Verdict { return peer.Send }, nil, false)
	if done {
		ls.refreshing = false
		ls.link.MarkRefreshed()
		return
	}
	n.fan.moreRefresh = true
	n.kickLocked()
}
