package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Routing: what applied to the world goes into the shared log (fanout.go),
// one entry per object a tick, a moving object's updates coalesced into
// its entry, with what the flush needs of each: the link its peer is on,
// its owner's standing, its state after the change.

// route appends applied records to the shared log. from is the link whose
// peer made the changes, or nil. n.mu must be held.
func (n *Node) route(recs []gameworld.Record, from *linkState) {
	n.routeAt(recs, from, time.Now().UnixNano(), nil)
}

// routeAt is route of records whose changes took effect at born (Unix
// nanoseconds), making the log's records of spare while it has some: an
// incoming message's time and records, taken before the lock.
func (n *Node) routeAt(recs []gameworld.Record, from *linkState, born int64, spare []peer.Record) {
	n.quota.ledger.Count(recs)
	f := &n.fan
	if f.bySlot == nil {
		f.bySlot = make(map[uint32]int)
	}
	if len(f.log) == 0 {
		f.unique = true
	}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Type == gameworld.Remove:
			if f.removed == nil {
				f.removed = map[string]bool{}
			}
			f.removed[r.ID] = true
			if n.xfer.asked.Len() > 0 {
				n.goneLocked(r.ID)
			}
		case r.Type == gameworld.Add && f.removed[r.ID]:
			f.unique = false // back in another slot
		}
		if n.life.persist != nil {
			n.life.persist.noteLocked(n, r)
		}
		if n.xfer.held.Len() > 0 && (r.Type == gameworld.Transfer || r.Type == gameworld.Remove) {
			n.supersededLocked(r)
		}
		if j, ok := f.bySlot[r.Slot]; ok {
			e := &f.log[j]
			if r.Type == gameworld.Update && e.from == from && e.rec.ID == r.ID && e.rec.Type != gameworld.Remove {
				next := n.newRecord(r.Change, r.Slot, e.rec.Born)
				next.ObjectScopes = r.ObjectScopes
				e.rec = peer.Coalesce(e.rec, next)
				f.recs[j] = e.rec
				e.after, e.full = r.After, nil
				continue
			}
			f.unique = false
		}
		f.bySlot[r.Slot] = len(f.log)
		var rec *peer.Record
		if len(spare) > 0 {
			rec, spare = &spare[0], spare[1:]
			rec.Change, rec.Slot, rec.Born = r.Change, r.Slot, born
		} else {
			rec = n.newRecord(r.Change, r.Slot, born)
		}
		rec.ObjectScopes = r.ObjectScopes
		oi := n.ownerInfo(r.Owner)
		f.deps = f.deps || oi.dep != nil
		f.log = append(f.log, logEntry{rec: rec, after: r.After, from: from, oi: oi})
		f.recs = append(f.recs, rec)
	}
	if n.opts.Tick == peer.Immediate {
		n.flushLocked()
	}
}

// wholeEntry is a whole record of the object in a slot, as it was at a
// version (wholeOf).
type wholeEntry struct {
	rec     *peer.Record
	version uint64
	digest  uint64
}

// wholeOf returns wholeRecord(o), made once a flush for every peer that is
// answered with o whole (refresh answers, region reveals): a crowd that
// joins at once would otherwise have every object encoded once per
// joiner. n.mu must be held.
func (n *Node) wholeOf(o gameworld.Object) *peer.Record {
	f := &n.fan
	if e, ok := f.whole[o.Slot]; ok && e.version == o.Version && e.digest == o.Digest && e.rec.ID == o.ID {
		return e.rec
	}
	r := wholeRecord(o)
	if f.whole == nil {
		f.whole = make(map[uint32]wholeEntry)
	}
	f.whole[o.Slot] = wholeEntry{rec: r, version: o.Version, digest: o.Digest}
	return r
}

// wholeRecord returns the add that gives a peer all of o: its properties
// and its scopes whole.
func wholeRecord(o gameworld.Object) *peer.Record {
	r := peer.NewRecord(gameworld.Change{Type: gameworld.Add, ID: o.ID, Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties, Scopes: o.Scopes.Snapshots()}, o.Slot)
	r.ObjectScopes = o.Scopes
	return r
}

func (n *Node) newRecord(c gameworld.Change, slot uint32, born int64) *peer.Record {
	r := peer.NewRecord(c, slot)
	r.Born = born
	return r
}
