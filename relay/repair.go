package relay

import (
	"log/slog"
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Repairs: a digest that differs is answered with the records of the
// buckets that differ; what the answer brings is counted by kind.

// handleRepair is the node's side of peer.DigestHandler (wire.go).
func (n *Node) handleRepair(l *peer.Link, typ string, r peer.Repair) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed || !ls.ready {
		return
	}
	switch typ {
	case peer.TypeRequestRepair:
		if len(n.deps.departing) > 0 {
			// Asked from a digest taken while a departure went out: the
			// peer asks again (antientropy.RepairTimeout) if it still differs.
			return
		}
		if ls.digest.Request(time.Now(), r) {
			n.answerRepairLocked(ls, r)
		} // else it is deferred, and answered by the digest loop
	case peer.TypeRepairing:
		// Our request's answer begins; its records follow, and only
		// they, until "repaired" (the peer sends its live changes after).
		ls.digest.Begin(r)
	case peer.TypeRepaired:
		asked, seen, ok := ls.digest.End()
		if !ok {
			return
		}
		defer n.life.metrics.DigestSince(time.Now())
		var extra []string
		n.world.Range(func(o gameworld.Object) bool {
			if r.Has(o.IDHash()) && asked.Has(o.IDHash()) && !seen(o.ID) && n.heldFrom(ls, o.Owner) {
				extra = append(extra, o.ID)
			}
			return true
		})
		if len(extra) > 0 {
			n.repaired(ls, RepairExtra, extra)
			set := make(map[string]bool, len(extra))
			for _, id := range extra {
				set[id] = true
			}
			n.removeWhere(func(o gameworld.Object) bool { return set[o.ID] }, nil)
		}
		n.sendGapRequestLocked(ls, time.Now())
	}
}

// answerRepairLocked sends ls's peer every object of the buckets asked for
// that it should hold from us, between repairing and repaired. n.mu must
// be held.
func (n *Node) answerRepairLocked(ls *linkState, r peer.Repair) {
	n.flushLocked()
	defer n.life.metrics.DigestSince(time.Now())
	known := ls.link.KnownSet()
	var recs []*peer.Record
	n.world.Range(func(o gameworld.Object) bool {
		if !r.Has(o.IDHash()) || !n.sentOver(ls, o.Owner) {
			return true
		}
		if ls.region != nil && !known(o.Slot) && !n.holds(ls.region, o.Properties, 0) {
			return true
		}
		recs = append(recs, wholeRecord(o))
		return true
	})
	if n.log.Enabled(n.life.ctx, slog.LevelDebug) { // (counting what the link knows costs a pass)
		n.log.Debug("answering a repair request", "link", ls.link.ID(), "buckets", len(r.Buckets), "of", r.Of, "records", len(recs), "queued", ls.link.Queued(), "known", len(ls.link.KnownSlots(nil)))
	}
	ls.link.SendRepair(peer.TypeRepairing, r)
	if len(recs) > 0 {
		ls.link.Offer(recs, func(int) peer.Verdict { return peer.Send }, nil, false)
	}
	ls.link.SendRepair(peer.TypeRepaired, r)
}

// seeRepairLocked notes the records of a repair answer before they are
// applied, counting what they repair. The peer sends nothing else between
// "repairing" and "repaired", so every add there is the answer's. n.mu
// must be held.
func (n *Node) seeRepairLocked(ls *linkState, changes []gameworld.Change) {
	asked, ok := ls.digest.Answer()
	if !ok {
		return // live changes sent before the peer had our request
	}
	var missing, stale []string
	for _, c := range changes {
		if c.Type != gameworld.Add || !asked.Has(gameworld.IDHash(c.ID)) {
			continue
		}
		ls.digest.Saw(c.ID)
		o, ok := n.world.Get(c.ID)
		switch {
		case !ok:
			missing = append(missing, c.ID)
		case o.Digest != gameworld.ChangeDigest(c):
			stale = append(stale, c.ID)
		}
	}
	if len(missing) > 0 {
		n.repaired(ls, RepairMissing, missing)
		ls.digest.NoteMissing(missing)
	}
	if len(stale) > 0 {
		n.repaired(ls, RepairStale, stale)
	}
}

// seeLateLocked looks for the peer's own adds of objects a repair brought
// as missing, among live changes: each is an object that was on its way
// when the digest said it was missing. n.mu must be held.
func (n *Node) seeLateLocked(ls *linkState, changes []gameworld.Change) {
	late, first := 0, ""
	for _, c := range changes {
		if c.Type == gameworld.Add && ls.digest.Late(c.ID) {
			if late++; first == "" {
				first = c.ID
			}
		}
	}
	if late > 0 {
		n.log.Info("objects a repair brought as missing arrived afterwards: the digest overtook them", "link", ls.link.ID(), "objects", late, "first", first)
	}
}

// repaired counts repaired objects of a kind, and logs the first repair of
// each kind at WARN: in a healthy deployment there are none, so one is a
// divergence found. n.mu must be held.
func (n *Node) repaired(ls *linkState, kind string, ids []string) {
	n.life.metrics.Repaired(kind, len(ids))
	first := slices.Clone(ids[:min(len(ids), 5)])
	if n.dig.repairs.Add(kind, len(ids)) {
		n.log.Warn("anti-entropy repaired a divergence", "kind", kind, "objects", len(ids), "first", first, "link", ls.link.ID(), "link_kind", ls.kind.String())
		return
	}
	n.log.Info("anti-entropy repaired a divergence", "kind", kind, "objects", len(ids), "first", first, "link", ls.link.ID())
}
