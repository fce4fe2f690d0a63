package relay

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// What each link is offered of a flush's log: the links that need
// nothing else of it on every core at once, those with a region the
// entries their cells hold.

// parallelMin is the work (records times links) below which a flush
// offers the log on one goroutine: starting others costs more.
const parallelMin = 4096

// offerParallel offers this flush's log to the links that need nothing
// else of it (no metadata, departed or message marks, no attachment),
// spread over the cores, and reports which it offered, by their place in
// n.hub.order (nil if none). Each Offer takes its own link's lock, a
// link's priority plan is its own (ls.prio), and both only read the
// node's state, which n.mu, held throughout, keeps still; what else a
// link gets in this flush (a refresh's next slice, answers) follows in
// flushLocked, after its records, as before. n.mu must be held.
func (n *Node) offerParallel(full func(int) *peer.Record, b *batch) []bool {
	f := &n.fan
	workers := min(runtime.GOMAXPROCS(0), len(n.hub.order))
	if workers < 2 || len(f.log) == 0 || len(f.log)*len(n.hub.order) < parallelMin {
		return nil
	}
	var picked []int
	for k, ls := range n.hub.order {
		// (A link whose priority just ended first gets what it is owed,
		// in flushLocked.)
		if (b == nil || !b.picked[k]) && ls.ready && ls.link != nil && (ls.prio == nil || n.prioritised(ls)) && (!ls.sched || n.scheduled(ls)) && !n.marksFor(ls) {
			picked = append(picked, k)
		}
	}
	if len(picked) < 2 {
		return nil
	}
	offered := make([]bool, len(n.hub.order))
	var next atomic.Int64
	work := func() {
		for {
			j := int(next.Add(1)) - 1
			if j >= len(picked) {
				return
			}
			ls := n.hub.order[picked[j]]
			if ls.region != nil {
				n.offerSubset(ls, ls.region.sub, false, peer.Metadata{}, full)
			} else {
				ls.link.Offer(f.recs, func(i int) peer.Verdict { return n.verdict(ls, i) }, full, f.unique)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(workers, len(picked)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	for _, k := range picked {
		offered[k] = true
	}
	return offered
}

// marksFor reports whether markLocked has anything of this flush's log
// for ls. n.mu must be held.
func (n *Node) marksFor(ls *linkState) bool {
	f := &n.fan
	return (len(f.mdAt) > 0 && (ls.kind == ownership.Upstream || ls.kind == ownership.Mesh)) ||
		(len(f.departedAt) > 0 && n.takesDeparted(ls)) ||
		(len(f.msgAt) > 0 && takesMessages(ls))
}

// offerSubset offers a link with a region the log entries it must
// consider (sub, in log order), sending metadata at the log's markers if
// announces. n.mu must be held.
func (n *Node) offerSubset(ls *linkState, sub []int, announces bool, md peer.Metadata, full func(int) *peer.Record) {
	f := &n.fan
	r := ls.region
	recs := r.recs[:0] // (Offer copies what it keeps)
	defer func() {
		clear(recs)
		r.recs = recs[:0]
	}()
	from := 0
	var ps *priority.Plan
	sched := false
	switch {
	case n.scheduled(ls):
		if ls.prio != nil { // it had a budget: what it is owed first
			n.offerOwedLocked(ls, ls.prio.Take(""))
			ls.prio = nil
		}
		ls.sched, sched = true, true
		if near, ok := f.near.subOf(ls, sub); ok {
			sub = near // (the rest wait for the schedule)
		}
	case n.prioritised(ls):
		n.offerOwedLocked(ls, n.planLocked(ls, sub, func(j int) peer.Verdict { return n.regionVerdict(ls, sub[j], n.verdict(ls, sub[j])) }))
		ps = ls.prio
	}
	// offer offers the entries at positions js of sub; under priority with
	// the verdicts the plan took. The last offer of a link on the
	// schedule carries what the schedule publishes for it too (dues, with
	// their verdicts), in the same message where it can.
	var dues []*peer.Record
	var dueVs []peer.Verdict
	offer := func(js []int) {
		if len(js) == 0 && len(dues) == 0 {
			return
		}
		recs = recs[:0]
		for _, j := range js {
			recs = append(recs, f.recs[sub[j]])
		}
		logged := len(recs)
		var vs []peer.Verdict
		var later []int // dues of objects that have an entry here
		if len(dues) > 0 {
			recs, vs, later = appendDues(recs, dues, dueVs, r.dueIn[:0])
			r.dueIn = vs
		}
		entry := func(k int) peer.Verdict { return n.regionVerdict(ls, sub[js[k]], n.verdict(ls, sub[js[k]])) }
		var folded map[int]peer.Verdict // entries whose object's due took their place
		if len(later) > 0 {
			later, folded = foldDues(recs[:logged], dues, dueVs, later, entry)
		}
		verdict := func(k int) peer.Verdict {
			switch {
			case k >= logged:
				return vs[k-logged]
			case folded != nil:
				if v, ok := folded[k]; ok {
					return v
				}
			}
			return entry(k)
		}
		if ps != nil {
			verdict = func(k int) peer.Verdict { return ps.Verdict(js[k]) }
		}
		fullj := func(k int) *peer.Record {
			if _, ok := folded[k]; ok || k >= logged {
				return n.wholeNow(recs[k])
			}
			return full(sub[js[k]])
		}
		if ls.att != nil {
			ls.att.offer(recs, verdict, fullj)
		} else {
			ls.link.Offer(recs, verdict, fullj, f.unique)
		}
		if len(later) > 0 {
			// (After the entry: the due holds its change and those the
			// object made while it was far.)
			recs = recs[:0]
			for _, k := range later {
				recs = append(recs, dues[k])
			}
			n.offerRecordsLocked(ls, recs, func(k int) peer.Verdict { return dueVs[later[k]] })
		}
		dues = nil
	}
	var kept []int
	flush := func(upTo int) {
		// Entries of sub before log position upTo.
		to := from
		for to < len(sub) && sub[to] < upTo {
			to++
		}
		// Under priority: without the entries that wait, and with what is
		// owed of an object before its entry that cannot wait.
		kept = kept[:0]
		for j := from; j < to; j++ {
			if ps != nil {
				if o := ps.Before(j); o != nil {
					offer(kept)
					kept = kept[:0]
					n.offerOwedLocked(ls, []*priority.Owed{o})
				}
				if ps.Waits(j) {
					continue
				}
			}
			if sched && n.waitsForSchedule(ls, sub[j]) {
				continue
			}
			kept = append(kept, j)
		}
		offer(kept)
		from = to
	}
	n.markLocked(ls, announces, md, flush)
	if sched {
		dues, dueVs = n.duesLocked(ls)
	}
	flush(len(f.log))
	clear(r.dueRecs)
}

// foldDues puts the due of an object in the place of its entry among
// logged (a message's entries of the log; later lists the positions in
// dues of the objects that have one there) where both go as updates: the
// due holds the entry's change and those the object made while it was
// far, so it does for both, and the link is not written a second message
// this tick for it. (A near object's due comes every 2^(bands-1) ticks,
// each object at its own; in a crowd most links have one most ticks.) It
// returns the dues left for a message of their own, and the verdicts of
// the entries replaced, by position.
func foldDues(logged, dues []*peer.Record, dueVs []peer.Verdict, later []int, entry func(int) peer.Verdict) (rest []int, folded map[int]peer.Verdict) {
	pos := slotFinder(logged, len(later))
	rest = later[:0]
	for _, k := range later {
		d := dues[k]
		if i := pos(d.Slot); i >= 0 && logged[i].ID == d.ID && logged[i].Type == gameworld.Update && d.Type == gameworld.Update {
			if v, ok := foldVerdict(entry(i), dueVs[k]); ok {
				if folded == nil {
					folded = map[int]peer.Verdict{}
				}
				logged[i], folded[i] = d, v
				continue
			}
		}
		rest = append(rest, k)
	}
	return rest, folded
}

// foldVerdict is what one record of an object gets in place of an entry
// and a due with verdicts a and b, each Send or Keep: sent if either
// would have been sent whatever the peer knows.
func foldVerdict(a, b peer.Verdict) (peer.Verdict, bool) {
	update := func(v peer.Verdict) bool { return v == peer.Send || v == peer.Keep }
	switch {
	case !update(a) || !update(b):
		return 0, false
	case a == peer.Send || b == peer.Send:
		return peer.Send, true
	}
	return peer.Keep, true
}

// appendDues appends to recs, a message's entries of the log, the dues of
// objects that have no entry there, and their verdicts to vs; it returns
// the positions in dues of the others, which follow in a message of their
// own.
func appendDues(recs, dues []*peer.Record, dueVs, vs []peer.Verdict) ([]*peer.Record, []peer.Verdict, []int) {
	pos := slotFinder(recs, len(dues))
	var later []int
	for k, d := range dues {
		if pos(d.Slot) >= 0 {
			later = append(later, k)
			continue
		}
		recs, vs = append(recs, d), append(vs, dueVs[k])
	}
	return recs, vs, later
}

// slotFinder returns where in recs the record of a slot is (-1: none),
// looked for n times. Few records (a crowd's link: its near changes of a
// tick, against most of the crowd's dues) are scanned, and only for slots
// whose bit a 256-bit mask of theirs has; many, looked for often, are
// found by a map.
func slotFinder(recs []*peer.Record, n int) func(slot uint32) int {
	if len(recs) > 64 && len(recs)*n > 4096 {
		at := make(map[uint32]int, len(recs))
		for i, r := range recs {
			at[r.Slot] = i
		}
		return func(slot uint32) int {
			if i, ok := at[slot]; ok {
				return i
			}
			return -1
		}
	}
	var mask [4]uint64
	for _, r := range recs {
		mask[r.Slot>>6&3] |= 1 << (r.Slot & 63)
	}
	return func(slot uint32) int {
		if mask[slot>>6&3]&(1<<(slot&63)) == 0 {
			return -1
		}
		for i, r := range recs {
			if r.Slot == slot {
				return i
			}
		}
		return -1
	}
}
