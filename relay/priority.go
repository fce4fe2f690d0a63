package relay

import (
	"math/bits"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// Priority and budgets (Options.Priority; docs/protocol.md, "Priority and
// budgets"): which client it applies to, its budget and the bands of its
// region. What a client with a budget waits for is its link's
// priority.Plan; far updates for clients without one wait on the node's
// priority.Schedule, shared by all of them, so that a crowd's far changes
// cost the node once each rather than once per client.

// PriorityOptions configures priority and budgets. The zero value turns
// both off.
type PriorityOptions struct {
	// Near is the distance from the centre of a client's region within
	// which objects are sent every tick; each doubling of the distance
	// beyond halves the rate, down to one tick in 2^(Bands-1). Zero means
	// no priority by distance.
	Near float64
	// Bands is the number of bands. Zero means 4 (every 1, 2, 4 and 8
	// ticks: 400 ms at the default tick).
	Bands int
	// MaxBytesPerSecond caps what one client is sent of updates; a client
	// may ask for less in its metadata ("budget"). Zero means no cap but
	// the client's.
	MaxBytesPerSecond int
}

// budgetLocked returns ls's budget in bytes per second, 0 for none: what
// its peer asked, capped by the node's cap, which does not apply to a
// peer that relays others (a proxy, a page's worker: "role":"proxy"),
// whose clients' budgets hold at their own links. n.mu must be held.
func (n *Node) budgetLocked(ls *linkState) int {
	md, _ := ls.link.Metadata()
	b := n.opts.Priority.MaxBytesPerSecond
	if md.Role == ownership.Proxy.String() {
		b = 0
	}
	if md.Budget > 0 && (b == 0 || md.Budget < b) {
		b = md.Budget
	}
	return b
}

// bandOf returns the band of position p for region boxes (interest.Band
// by the node's priority options).
func (n *Node) bandOf(p [3]float64, boxes []peer.Box) int {
	return interest.Band(p, boxes, n.opts.Priority.Near, n.opts.Priority.Bands)
}

// prioritised reports whether priority or a budget applies to ls now.
// n.mu must be held.
func (n *Node) prioritised(ls *linkState) bool {
	return ls.link != nil && ls.kind == ownership.Downstream && ls.region != nil && ls.region.HasBoxes &&
		(n.opts.Priority.Near > 0 || n.budgetLocked(ls) > 0)
}

// planLocked decides, for a link under priority, which of this flush's
// entries (sub, with their verdicts) wait (package priority), and returns
// the owed updates to send first. n.mu must be held.
func (n *Node) planLocked(ls *linkState, sub []int, verdict func(j int) peer.Verdict) []*priority.Owed {
	if ls.prio == nil {
		ls.prio = priority.New()
	}
	f := &n.fan
	entries := ls.prio.Entries(len(sub))
	for j, i := range sub {
		e := &f.log[i]
		entries[j] = priority.Entry{Rec: e.rec, Verdict: verdict(j), Placed: e.spot.HasP}
	}
	band := func(j int) int { return n.bandOf(f.log[sub[j]].spot.P, ls.region.Boxes) }
	return ls.prio.Decide(entries, f.unique, band, priority.Budget{BytesPerSecond: float64(n.budgetLocked(ls)), Tick: n.opts.Tick, Now: time.Now()})
}

// owingLocked reports whether a link waits for owed updates: the flush
// then runs with nothing new, to send them when due. n.mu must be held.
func (n *Node) owingLocked() bool {
	if n.fan.sched != nil && n.fan.sched.Len() > 0 {
		return true
	}
	for _, ls := range n.sp.Regioned() {
		if ls.prio != nil && ls.prio.Owing() > 0 {
			return true
		}
	}
	return false
}

// sendOwedLocked sends ls what it is owed: of the objects of owner, or of
// every object if owner is "". n.mu must be held.
func (n *Node) sendOwedLocked(ls *linkState, owner string) {
	if ls.sched {
		n.offerPendingLocked(ls, owner)
		return
	}
	if ls.prio == nil || ls.prio.Owing() == 0 {
		return
	}
	n.offerOwedLocked(ls, ls.prio.Take(owner))
}

// offerOwedLocked offers ls owed updates, each with its verdict, whole
// (as the world holds the object now) where the peer lacks it. n.mu must
// be held.
func (n *Node) offerOwedLocked(ls *linkState, out []*priority.Owed) {
	if len(out) == 0 {
		return
	}
	recs := make([]*peer.Record, len(out))
	for i, o := range out {
		recs[i] = o.Rec
	}
	n.offerRecordsLocked(ls, recs, func(i int) peer.Verdict { return out[i].Verdict })
}

// offerRecordsLocked offers ls records of objects with the verdicts
// given, whole (as the world holds the object now) where the peer lacks
// one. n.mu must be held.
func (n *Node) offerRecordsLocked(ls *linkState, recs []*peer.Record, verdict func(i int) peer.Verdict) {
	if len(recs) == 0 || ls.link == nil {
		return
	}
	ls.link.Offer(recs, verdict, func(i int) *peer.Record { return n.wholeNow(recs[i]) }, true)
}

// wholeNow is the add that gives a peer that lacks it the object of rec
// as the world holds it now, or nil if it is gone. n.mu must be held.
func (n *Node) wholeNow(rec *peer.Record) *peer.Record {
	o, ok := n.world.Get(rec.ID)
	if !ok || o.Slot != rec.Slot {
		return nil
	}
	full := wholeRecord(o)
	full.Born = rec.Born
	return full
}

// scheduled reports whether ls takes far updates on the node's shared
// schedule: priority by distance applies to it, without a budget. n.mu
// must be held.
func (n *Node) scheduled(ls *linkState) bool {
	return n.opts.Priority.Near > 0 && n.prioritised(ls) && n.budgetLocked(ls) == 0
}

// due is an object the schedule publishes in this flush, with its
// owner's standing when the flush began.
type due struct {
	priority.Due[interest.Spot]
	oi ownerInfo
}

// scheduleLocked folds this flush's placed updates into the schedule and
// lists what it publishes. n.mu must be held.
func (n *Node) scheduleLocked() {
	f := &n.fan
	if n.opts.Priority.Near <= 0 || !n.sp.Active() {
		return
	}
	if f.sched == nil {
		f.sched = priority.NewSchedule[interest.Spot](n.opts.Priority.Bands)
	}
	f.near.build(f.log, n.opts.Priority.Near)
	for i := range f.log {
		e := &f.log[i]
		f.sched.Note(e.rec, e.spot.HasP, e.spot)
	}
	if f.sched.Len() == 0 {
		return
	}
	// Which links take each due is found from where it is and its bands
	// (interest.Shells); one without a position is taken by every link
	// if band 0 is published to, by none otherwise.
	near, bands := n.opts.Priority.Near, n.opts.Priority.Bands
	for _, d := range f.sched.Next() {
		f.dues = append(f.dues, due{Due: d, oi: n.ownerInfo(d.Rec.Owner)})
		if !d.Place.HasP {
			if i := f.shells.Add(d.Place.P); d.Zero {
				f.unplaced = append(f.unplaced, i)
			}
			continue
		}
		var buf [2]interest.Shell
		sh := buf[:0]
		if s, ok := interest.BandShell(near, bands, 0, 0); ok && d.Zero {
			sh = append(sh, s)
		}
		if s, ok := interest.BandShell(near, bands, d.Min, d.Max); ok {
			sh = append(sh, s)
		}
		f.shells.Add(d.Place.P, sh...)
	}
	f.shells.Build()
}

// waitsForSchedule reports whether the log's i-th entry waits for the
// schedule for ls: an update of a placed object beyond the nearest band,
// that ls's region would have it sent. (Whether ownership lets ls have it
// is asked when it is published: an update ls may not have waits as
// well as not.) Cheapest first: every link with a region under priority
// asks it of every entry it considers. n.mu must be held, or ls be
// offered on one goroutine while n.mu is (offerParallel).
func (n *Node) waitsForSchedule(ls *linkState, i int) bool {
	e := &n.fan.log[i]
	if e.rec.Type != gameworld.Update || !e.spot.HasP || e.from == ls {
		return false
	}
	r := ls.region
	if near := n.opts.Priority.Near; interest.Dist2(e.spot.P, r.Boxes) <= near*near {
		return false
	}
	v := r.Verdict(&e.spot, n.opts.InterestMargin)
	return v == peer.Send || v == peer.Keep
}

// pendingVerdict says what ls gets of an object's pending record.
func (n *Node) pendingVerdict(ls *linkState, spot *interest.Spot, oi ownerInfo) peer.Verdict {
	if oi.dep != nil || !ownership.MaySend(n.role, ls.kind, oi.relation(ls)) {
		return peer.Skip // (a departing world's objects go with it)
	}
	if ls.region != nil {
		return ls.region.Verdict(spot, n.opts.InterestMargin)
	}
	return peer.Send
}

// duesLocked returns what this flush publishes for ls's bands, with the
// verdicts: of what is published to bands 1 to m, what is in one of those
// for it (by squared distance: every link looks at every object
// published), and all that is published to every band. The slices are
// ls's, until its next flush. n.mu must be held, or ls be offered on one
// goroutine while n.mu is.
func (n *Node) duesLocked(ls *linkState) ([]*peer.Record, []peer.Verdict) {
	r := ls.region
	f := &n.fan
	recs, vs := r.dueRecs[:0], r.dueVerdicts[:0]
	taken := r.dueBits[:0]
	taken = append(taken, make([]uint64, (len(f.dues)+63)/64)...)
	centres := interest.CentresOf(r.Boxes)
	f.shells.Take(&centres, taken)
	for _, i := range f.unplaced {
		taken[i>>6] |= 1 << (i & 63)
	}
	for w, word := range taken {
		for ; word != 0; word &= word - 1 {
			d := &f.dues[w<<6|bits.TrailingZeros64(word)]
			if v := n.pendingVerdict(ls, &d.Place, d.oi); v == peer.Send || v == peer.Keep {
				recs, vs = append(recs, d.Rec), append(vs, v)
			}
		}
	}
	r.dueRecs, r.dueVerdicts, r.dueBits = recs, vs, taken
	return recs, vs
}

// offerPendingLocked offers ls what is pending on the schedule of the
// objects of owner, or of every object if owner is "". n.mu must be held.
func (n *Node) offerPendingLocked(ls *linkState, owner string) {
	if n.fan.sched == nil {
		return
	}
	var recs []*peer.Record
	var vs []peer.Verdict
	n.fan.sched.Pending(owner, func(rec *peer.Record, spot interest.Spot) {
		if v := n.pendingVerdict(ls, &spot, n.ownerInfo(rec.Owner)); v == peer.Send || v == peer.Keep {
			recs, vs = append(recs, rec), append(vs, v)
		}
	})
	n.offerRecordsLocked(ls, recs, func(i int) peer.Verdict { return vs[i] })
}
