package relay

import (
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
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
	owed map[uint32]*owedRec
	// queues hold, by band, the owed updates in the order they began to
	// wait (oldest first): the longest waiting of a band is at its head.
	// An entry no longer owed, or since moved to a nearer band, is
	// skipped.
	queues []owedQueue
	tick   uint64
	tokens float64
	last   time.Time
	// skip marks the entries of this flush's sub that wait (or were
	// folded into what is owed); before[j] is what the link is owed of
	// entry j's object, to go before it.
	skip   []bool
	before map[int]*owedRec
	// v holds the verdicts of this flush's sub, as the plan took them.
	v []peer.Verdict
}

// owedQueue is a band's owed updates, oldest first from head.
type owedQueue struct {
	items []*owedRec
	head  int
}

// owedRec is an update a link waits for: its latest value, the verdict it
// had, when it began waiting and how far it is.
type owedRec struct {
	rec   *peer.Record
	v     peer.Verdict
	since uint64
	band  int
	done  bool // sent, or no longer owed
}

// score is how due an owed update is: 1 when its band's period has
// passed, more the longer it waited.
func (o *owedRec) score(tick uint64) float64 {
	return float64(tick-o.since+1) / float64(uint64(1)<<o.band)
}

// owe adds an update to what the link is owed.
func (ps *prioState) owe(o *owedRec) {
	ps.owed[o.rec.Slot] = o
	ps.queue(o)
}

// queue puts o at the end of its band's queue.
func (ps *prioState) queue(o *owedRec) {
	for len(ps.queues) <= o.band {
		ps.queues = append(ps.queues, owedQueue{})
	}
	q := &ps.queues[o.band]
	q.items = append(q.items, o)
	if q.head > 64 && q.head > len(q.items)/2 {
		q.items = append(q.items[:0:0], q.items[q.head:]...)
		q.head = 0
	}
}

// take removes o from what the link is owed.
func (ps *prioState) take(o *owedRec) {
	o.done = true
	delete(ps.owed, o.rec.Slot)
}

// peek returns the longest waiting update of band b still owed there, or
// nil.
func (ps *prioState) peek(b int) *owedRec {
	if b >= len(ps.queues) {
		return nil
	}
	q := &ps.queues[b]
	for q.head < len(q.items) {
		if o := q.items[q.head]; !o.done && o.band == b {
			return o
		}
		q.items[q.head] = nil
		q.head++
	}
	q.items, q.head = q.items[:0], 0
	return nil
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
	ps.skip = slices.Grow(ps.skip[:0], len(sub))[:len(sub)]
	clear(ps.skip)
	ps.v = slices.Grow(ps.v[:0], len(sub))[:len(sub)]
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
	var fresh []int // near updates of this flush, not owed before
	forced := 0
	for j, i := range sub {
		e := &f.log[i]
		v := verdict(j)
		ps.v[j] = v
		if e.rec.Type != gameworld.Update || (v != peer.Send && v != peer.Keep) || !e.hasP {
			if o := ps.owed[e.rec.Slot]; o != nil {
				// What it is owed of the object goes first.
				if ps.before == nil {
					ps.before = map[int]*owedRec{}
				}
				ps.before[j] = o
				ps.take(o)
				forced += len(o.rec.Encoded())
			}
			if v == peer.Send || v == peer.Reveal {
				// (A hide or keep of an object the peer lacks sends
				// nothing: only what surely goes is counted.)
				forced += len(e.rec.Encoded())
			}
			continue
		}
		band := n.bandOf(e.p, ls.region.boxes)
		if o := ps.owed[e.rec.Slot]; o != nil {
			o.rec = peer.Coalesce(o.rec, e.rec)
			if v == peer.Send {
				o.v = peer.Send
			}
			if band < o.band {
				o.band = band // it came nearer: it waits in its new band
				ps.queue(o)
			}
			ps.skip[j] = true
			continue
		}
		if band == 0 && !twice[e.rec.Slot] {
			fresh = append(fresh, j)
			continue
		}
		// Far, or one of several changes of the object in this flush
		// (folded together, and due at once if near).
		ps.owe(&owedRec{rec: e.rec, v: v, since: ps.tick, band: band})
		ps.skip[j] = true
	}
	if budget > 0 {
		// What cannot wait is sent whatever the budget, and counted; the
		// debt it leaves is at most one window's, so that a burst of
		// adds does not starve the updates for long.
		ps.tokens = max(ps.tokens-float64(forced), -budget*max(2*n.opts.Tick.Seconds(), 0.1))
	}
	fits := func(floor float64) bool { return budget <= 0 || ps.tokens > floor }
	send := func(o *owedRec) {
		first = append(first, o)
		ps.take(o)
		ps.tokens -= float64(len(o.rec.Encoded()))
	}
	// Near objects first, those that waited first, with a quarter of the
	// tick's budget kept for the rest; then the rest by how long they
	// waited for their band; then near ones again if any is left.
	next := 0 // of fresh
	near := func(floor float64) {
		for o := ps.peek(0); o != nil && fits(floor); o = ps.peek(0) {
			send(o)
		}
		for ; next < len(fresh) && fits(floor); next++ {
			ps.tokens -= float64(len(f.log[sub[fresh[next]]].rec.Encoded()))
		}
	}
	near(budget * n.opts.Tick.Seconds() / 4)
	for fits(0) {
		var best *owedRec
		for b := 1; b < len(ps.queues); b++ {
			if o := ps.peek(b); o != nil && o.score(ps.tick) >= 1 && (best == nil || o.score(ps.tick) > best.score(ps.tick)) {
				best = o
			}
		}
		if best == nil {
			break
		}
		send(best)
	}
	near(0)
	for _, j := range fresh[next:] {
		// A near update that does not fit waits, first in line next time
		// (it will have waited a tick).
		ps.owe(&owedRec{rec: f.log[sub[j]].rec, v: ps.v[j], since: ps.tick})
		ps.skip[j] = true
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
	for _, o := range ls.prio.owed {
		if owner == "" || o.rec.Owner == owner {
			out = append(out, o)
			ls.prio.take(o)
		}
	}
	if owner == "" {
		ls.prio.queues = nil
	}
	n.offerOwedLocked(ls, out)
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
