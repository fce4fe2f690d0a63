package relay

import (
	"math"
	"sort"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Priority and budgets (Options.Priority; docs/protocol.md, "Priority and
// budgets"). A client with a region is sent the updates of objects near
// its centre every tick and those farther less often: bands of distance,
// each twice as far as the one before and sent half as often. A client
// may also have a budget of bytes per second: what does not fit waits,
// the longest-waiting first. Nothing is dropped: an update that waits is
// coalesced with the object's later ones (an object is owed to the client
// once, at its latest value), and adds, removes, transfers and hides never
// wait; before any of them, before a message or departure of the owner,
// a region change, a refresh or a digest, what the client is owed of the
// object (or of everything) goes first.

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

// prioState is what a link is owed, and its budget. Guarded by Node.mu.
type prioState struct {
	owed   map[uint32]*owedRec
	tick   uint64
	tokens float64
	last   time.Time
	// skip marks the entries of this flush's sub that wait (or were
	// folded into what is owed); before[j] is what the link is owed of
	// entry j's object, to go before it.
	skip   []bool
	before map[int]*owedRec
}

// owedRec is an update a link waits for: its latest value, the verdict it
// had, when it began waiting and how far it is.
type owedRec struct {
	rec   *peer.Record
	v     peer.Verdict
	since uint64
	band  int
}

// score is how due an owed update is: 1 when its band's period has
// passed, more the longer it waited.
func (o *owedRec) score(tick uint64) float64 {
	return float64(tick-o.since+1) / float64(uint64(1)<<o.band)
}

// budgetLocked returns ls's budget in bytes per second, 0 for none. n.mu
// must be held.
func (n *Node) budgetLocked(ls *linkState) int {
	b := n.opts.Priority.MaxBytesPerSecond
	if md, ok := ls.link.Metadata(); ok && md.Budget > 0 && (b == 0 || md.Budget < b) {
		b = md.Budget
	}
	return b
}

// bandOf returns the band of position p for region boxes: 0 within Near
// of a box's centre.
func (n *Node) bandOf(p [3]float64, boxes []peer.Box) int {
	near := n.opts.Priority.Near
	if near <= 0 || len(boxes) == 0 {
		return 0
	}
	d := math.Inf(1)
	for _, b := range boxes {
		var s float64
		for k := range 3 {
			c := (b.Min[k] + b.Max[k]) / 2
			s += (p[k] - c) * (p[k] - c)
		}
		d = min(d, math.Sqrt(s))
	}
	if d <= near {
		return 0
	}
	return min(n.opts.Priority.Bands-1, int(math.Ceil(math.Log2(d/near))))
}

// prioritised reports whether priority or a budget applies to ls now.
// n.mu must be held.
func (n *Node) prioritised(ls *linkState) bool {
	return ls.link != nil && ls.kind == ownership.Downstream && ls.region != nil && ls.region.hasBoxes &&
		(n.opts.Priority.Near > 0 || n.budgetLocked(ls) > 0)
}

// planLocked decides, for a link under priority, which of this flush's
// entries (sub, with their verdicts) wait, and returns the owed updates
// to send first. n.mu must be held.
func (n *Node) planLocked(ls *linkState, sub []int, verdict func(j int) peer.Verdict) (first []*owedRec) {
	ps := ls.prio
	if ps == nil {
		ps = &prioState{owed: map[uint32]*owedRec{}}
		ls.prio = ps
	}
	ps.tick++
	now := time.Now()
	budget := float64(n.budgetLocked(ls))
	if budget > 0 {
		capacity := budget * max(2*n.opts.Tick.Seconds(), 0.1)
		if ps.last.IsZero() {
			ps.tokens = capacity
		} else {
			ps.tokens = min(ps.tokens+budget*now.Sub(ps.last).Seconds(), capacity)
		}
		ps.last = now
	}
	f := &n.fan
	ps.skip = append(ps.skip[:0], make([]bool, len(sub))...)
	clear(ps.before)
	var twice map[uint32]bool
	if !f.unique {
		seen := map[uint32]bool{}
		for _, i := range sub {
			s := f.log[i].rec.Slot
			if seen[s] {
				if twice == nil {
					twice = map[uint32]bool{}
				}
				twice[s] = true
			}
			seen[s] = true
		}
	}
	type cand struct {
		j int
		o *owedRec
		s float64
	}
	var cands []cand
	forced := 0
	for j, i := range sub {
		e := &f.log[i]
		v := verdict(j)
		if e.rec.Type != gameworld.Update || (v != peer.Send && v != peer.Keep) || !e.hasP || twice[e.rec.Slot] {
			if o := ps.owed[e.rec.Slot]; o != nil {
				// What it is owed of the object goes first.
				if ps.before == nil {
					ps.before = map[int]*owedRec{}
				}
				ps.before[j] = o
				delete(ps.owed, e.rec.Slot)
				forced += len(o.rec.Encoded())
			}
			if v != peer.Skip && v != peer.Echo {
				forced += len(e.rec.Encoded())
			}
			continue
		}
		band := n.bandOf(e.p, ls.region.boxes)
		if o := ps.owed[e.rec.Slot]; o != nil {
			o.rec = peer.Coalesce(o.rec, e.rec)
			o.band = min(o.band, band)
			if v == peer.Send {
				o.v = peer.Send
			}
			ps.skip[j] = true
			continue
		}
		if band == 0 {
			cands = append(cands, cand{j: j, s: 1})
			continue
		}
		ps.owed[e.rec.Slot] = &owedRec{rec: e.rec, v: v, since: ps.tick, band: band}
		ps.skip[j] = true
	}
	for _, o := range ps.owed {
		if s := o.score(ps.tick); s >= 1 {
			cands = append(cands, cand{o: o, s: s})
		}
	}
	if budget > 0 {
		// What cannot wait is sent whatever the budget, and counted; the
		// debt it leaves is at most one window's, so that a burst of
		// adds does not starve the updates for long.
		ps.tokens = max(ps.tokens-float64(forced), -budget*max(2*n.opts.Tick.Seconds(), 0.1))
	}
	// Near objects first, those that waited longest first, with a quarter
	// of the tick's budget kept for the rest; then the rest by how long
	// they waited for their band; then near ones again if any is left.
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].s > cands[b].s })
	bandOf := func(c cand) int {
		if c.o != nil {
			return c.o.band
		}
		return 0
	}
	reserve := budget * n.opts.Tick.Seconds() / 4
	taken := make([]bool, len(cands))
	admit := func(near bool, floor float64) {
		for k, c := range cands {
			if taken[k] || (bandOf(c) == 0) != near || (budget > 0 && ps.tokens <= floor) {
				continue
			}
			taken[k] = true
			if c.o != nil {
				first = append(first, c.o)
				delete(ps.owed, c.o.rec.Slot)
				ps.tokens -= float64(len(c.o.rec.Encoded()))
			} else {
				ps.tokens -= float64(len(f.log[sub[c.j]].rec.Encoded()))
			}
		}
	}
	admit(true, reserve)
	admit(false, 0)
	admit(true, 0)
	for k, c := range cands {
		if !taken[k] && c.o == nil {
			// A near update that does not fit waits, first in line next
			// time (it will have waited a tick).
			e := &f.log[sub[c.j]]
			ps.owed[e.rec.Slot] = &owedRec{rec: e.rec, v: verdict(c.j), since: ps.tick, band: 0}
			ps.skip[c.j] = true
		}
	}
	return first
}

// owingLocked reports whether a link waits for owed updates: the flush
// then runs with nothing new, to send them when due. n.mu must be held.
func (n *Node) owingLocked() bool {
	for _, ls := range n.sp.regioned {
		if ls.prio != nil && len(ls.prio.owed) > 0 {
			return true
		}
	}
	return false
}

// sendOwedLocked sends ls what it is owed: of the objects of owner, or of
// every object if owner is "". n.mu must be held.
func (n *Node) sendOwedLocked(ls *linkState, owner string) {
	if ls.prio == nil || len(ls.prio.owed) == 0 {
		return
	}
	var out []*owedRec
	for slot, o := range ls.prio.owed {
		if owner == "" || o.rec.Owner == owner {
			out = append(out, o)
			delete(ls.prio.owed, slot)
		}
	}
	n.offerOwedLocked(ls, out)
}

// sendOwedSlotLocked sends ls what it is owed of the object in slot, if
// anything. n.mu must be held.
func (n *Node) sendOwedSlotLocked(ls *linkState, slot uint32) {
	if ls.prio == nil {
		return
	}
	if o := ls.prio.owed[slot]; o != nil {
		delete(ls.prio.owed, slot)
		n.offerOwedLocked(ls, []*owedRec{o})
	}
}

// offerOwedLocked offers ls owed updates, each with its verdict, whole
// (as the world holds the object now) where the peer lacks it. n.mu must
// be held.
func (n *Node) offerOwedLocked(ls *linkState, out []*owedRec) {
	if len(out) == 0 || ls.link == nil {
		return
	}
	recs := make([]*peer.Record, len(out))
	for i, o := range out {
		recs[i] = o.rec
	}
	ls.link.Offer(recs, func(i int) peer.Verdict { return out[i].v }, func(i int) *peer.Record {
		o, ok := n.world.Get(recs[i].ID)
		if !ok || o.Slot != recs[i].Slot {
			return nil
		}
		full := n.newRecord(gameworld.Change{Type: gameworld.Add, ID: o.ID, Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties,
			Scopes: o.Scopes.Snapshots()}, o.Slot, recs[i].Born)
		full.ObjectScopes = o.Scopes
		return full
	}, true)
}
