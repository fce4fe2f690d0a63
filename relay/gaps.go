package relay

import (
	"errors"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/scope"
)

// Gaps: a scope delta built on a version this node never got cannot be
// applied, and the copy stays behind until someone sends the object whole.
// Rather than wait for the next digest (--digest-interval), the node asks
// the peer that sent it for the object at once, with the repair request
// anti-entropy uses, naming the object's bucket among antientropy.GapBuckets.

// askForGapsLocked notes the objects whose scope deltas ls's peer sent
// with a gap and asks for them, unless a repair is already in flight on
// the link (then they are asked for when it ends). Only a peer that takes
// part in anti-entropy answers. n.mu must be held.
func (n *Node) askForGapsLocked(ls *linkState, refused []gameworld.Refusal) {
	for _, rf := range refused {
		if !errors.Is(rf.Err, scope.ErrGap) || !speaksDigest(ls) {
			continue
		}
		ls.digest.Gap(gameworld.IDHash(rf.Change.ID))
	}
	n.sendGapRequestLocked(ls, time.Now())
}

// sendGapRequestLocked asks ls's peer for the buckets of the gaps noted,
// if no repair is in flight there. n.mu must be held.
func (n *Node) sendGapRequestLocked(ls *linkState, now time.Time) {
	if ls.link == nil {
		return
	}
	r, ok := ls.digest.GapRequest(now)
	if !ok {
		return
	}
	n.log.Debug("a scope delta came with a gap; asking for the objects", "link", ls.link.ID(), "buckets", len(r.Buckets))
	ls.link.SendRepair(peer.TypeRequestRepair, r)
}

// answerDeferredLocked answers the repair requests that came within
// antientropy.MinGap of the one before (a gap's request right after a digest's),
// and sends the gaps' requests that waited for a repair to end. n.mu must
// be held.
func (n *Node) answerDeferredLocked(now time.Time) {
	for _, ls := range n.hub.order {
		if ls.link != nil && ls.ready && len(n.deps.departing) == 0 {
			if r, ok := ls.digest.Deferred(now); ok {
				n.answerRepairLocked(ls, r)
			}
		}
		n.sendGapRequestLocked(ls, now)
	}
}
