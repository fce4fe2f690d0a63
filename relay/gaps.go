package relay

import (
	"errors"
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/scope"
)

// Gaps: a scope delta built on a version this node never got cannot be
// applied, and the copy stays behind until someone sends the object whole.
// Rather than wait for the next digest (--digest-interval), the node asks
// the peer that sent it for the object at once, with the repair request
// anti-entropy uses, naming the object's bucket among gapBuckets.

// gapBuckets is how finely a gap's request names objects: a bucket of
// 4,096 (the most a repair may name) holds the object and few others.
const gapBuckets = 4096

// askForGapsLocked notes the objects whose scope deltas ls's peer sent
// with a gap and asks for them, unless a repair is already in flight on
// the link (then they are asked for when it ends). Only a peer that takes
// part in anti-entropy answers. n.mu must be held.
func (n *Node) askForGapsLocked(ls *linkState, refused []gameworld.Refusal) {
	for _, rf := range refused {
		if !errors.Is(rf.Err, scope.ErrGap) || !speaksDigest(ls) {
			continue
		}
		if ls.digest.gaps == nil {
			ls.digest.gaps = map[int]bool{}
		}
		ls.digest.gaps[int(gameworld.IDHash(rf.Change.ID)%gapBuckets)] = true
	}
	n.sendGapRequestLocked(ls, time.Now())
}

// sendGapRequestLocked asks ls's peer for the buckets of the gaps noted,
// if no repair is in flight there. n.mu must be held.
func (n *Node) sendGapRequestLocked(ls *linkState, now time.Time) {
	if len(ls.digest.gaps) == 0 || ls.link == nil {
		return
	}
	if rs := ls.digest.repair; rs != nil {
		if now.Sub(rs.since) <= repairTimeout {
			return
		}
		ls.digest.repair = nil // unanswered: ask again
	}
	r := peer.Repair{Of: gapBuckets}
	for b := range ls.digest.gaps {
		r.Buckets = append(r.Buckets, b)
	}
	slices.Sort(r.Buckets)
	ls.digest.gaps = nil
	n.log.Debug("a scope delta came with a gap; asking for the objects", "link", ls.link.ID(), "buckets", len(r.Buckets))
	ls.digest.repair = &repairState{r: r, seen: map[string]bool{}, since: now}
	ls.link.SendRepair(peer.TypeRequestRepair, r)
}

// answerDeferredLocked answers the repair requests that came within
// minDigestGap of the one before (a gap's request right after a digest's),
// and sends the gaps' requests that waited for a repair to end. n.mu must
// be held.
func (n *Node) answerDeferredLocked(now time.Time) {
	for _, ls := range n.hub.order {
		if r := ls.digest.deferred; r != nil && ls.link != nil && ls.ready && len(n.deps.departing) == 0 && now.Sub(ls.digest.lastAsked) >= minDigestGap {
			ls.digest.deferred = nil
			ls.digest.lastAsked = now
			n.answerRepairLocked(ls, *r)
		}
		n.sendGapRequestLocked(ls, now)
	}
}

// deferRepair keeps a request that came too soon after the one before,
// to be answered by answerDeferredLocked: buckets of the same size merge.
// n.mu must be held.
func (ls *linkState) deferRepair(r peer.Repair) {
	if d := ls.digest.deferred; d != nil && d.Of == r.Of {
		for _, b := range r.Buckets {
			if !slices.Contains(d.Buckets, b) {
				d.Buckets = append(d.Buckets, b)
			}
		}
		slices.Sort(d.Buckets)
		return
	}
	ls.digest.deferred = &r
}
