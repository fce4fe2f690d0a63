package priority

import (
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Entry is one record of a flush as a plan sees it.
type Entry struct {
	Rec *peer.Record
	// Verdict is what the client gets of the record (peer.Verdict).
	Verdict peer.Verdict
	// Placed: the record is an update of an object with a position, so
	// it may wait by its band.
	Placed bool
}

// Owed is an update a client waits for: its latest value and verdict.
type Owed struct {
	Rec     *peer.Record
	Verdict peer.Verdict
	since   uint64 // the tick it began waiting
	band    int
	done    bool // sent, or no longer owed
	// queued counts the band queues that hold it (one, or two when it
	// came nearer): a done update none holds is reused.
	queued int8
}

// score is how due an owed update is: 1 when its band's period has
// passed, more the longer it waited.
func (o *Owed) score(tick uint64) float64 {
	return float64(tick-o.since+1) / float64(uint64(1)<<o.band)
}

// Plan is what one client is owed, and its budget. The zero value is
// not usable; New returns one.
type Plan struct {
	owed map[uint32]*Owed // by the object's slot
	// queues hold, by band, the owed updates in the order they began to
	// wait (oldest first): the longest waiting of a band is at its head.
	// An entry no longer owed, or since moved to a nearer band, is
	// skipped.
	queues []owedQueue
	tick   uint64
	tokens float64
	last   time.Time
	// Of the last Decide's entries: skip marks those that wait (or were
	// folded into what is owed); before[j] is what the client is owed of
	// entry j's object, to go before it; v their verdicts.
	skip   []bool
	before map[int]*Owed
	v      []peer.Verdict
	buf    []Entry
	// spare are owed updates done and in no queue, for owe to reuse;
	// retired those that became so during this Decide, which its caller
	// may still hold (what it returned, Before's), reused from the next.
	spare, retired []*Owed
}

// owedQueue is a band's owed updates, oldest first from head.
type owedQueue struct {
	items []*Owed
	head  int
}

// maxSpare bounds the owed updates a plan keeps for reuse: a client once
// owed a whole big world keeps no more than this of it (about 48 KiB)
// after, while a crowd's client, which takes and owes a few hundred a
// flush, reuses nearly all.
const maxSpare = 1024

// New returns an empty plan.
func New() *Plan { return &Plan{owed: map[uint32]*Owed{}} }

// Entries returns a slice of n entries for the next Decide, reused from
// flush to flush.
func (p *Plan) Entries(n int) []Entry {
	p.buf = slices.Grow(p.buf[:0], n)[:n]
	return p.buf
}

// Owing reports how many objects the client is owed.
func (p *Plan) Owing() int { return len(p.owed) }

// Waits reports whether the last Decide's entry j waits (or was folded
// into what the client is owed of its object).
func (p *Plan) Waits(j int) bool { return p.skip[j] }

// Before returns what the client is owed of entry j's object, to be sent
// just before entry j, or nil.
func (p *Plan) Before(j int) *Owed { return p.before[j] }

// Verdict returns the verdict entry j had in the last Decide.
func (p *Plan) Verdict(j int) peer.Verdict { return p.v[j] }

// Take removes and returns what the client is owed of the objects of
// owner, or of every object if owner is "".
func (p *Plan) Take(owner string) []*Owed {
	var out []*Owed
	for _, o := range p.owed {
		if owner == "" || o.Rec.Owner == owner {
			out = append(out, o)
			p.take(o)
		}
	}
	if owner == "" {
		p.queues = nil
	}
	return out
}

// Budget is a client's budget for one Decide.
type Budget struct {
	// BytesPerSecond is the client's budget, 0 for none.
	BytesPerSecond float64
	// Tick is the node's tick; a budget's tokens hold two ticks' worth
	// (at least 0.1 s).
	Tick time.Duration
	// Now is the time of the flush.
	Now time.Time
}

// Decide takes a flush's entries for the client (in order; see Entries)
// and decides which wait; band(j) is entry j's band, asked only of placed
// updates the client is sent (0 nearest). unique says no object has two
// entries. It returns the owed updates due now, to be sent before the
// flush's entries; then Waits, Before and Verdict say what to do with
// each entry. What it returns, and what Before and Take return, may be
// reused by the next Decide.
func (p *Plan) Decide(entries []Entry, unique bool, band func(j int) int, b Budget) (first []*Owed) {
	p.tick++
	if keep := maxSpare - len(p.spare); keep > 0 {
		p.spare = append(p.spare, p.retired[:min(keep, len(p.retired))]...)
	}
	clear(p.retired)
	p.retired = p.retired[:0]
	budget := b.BytesPerSecond
	window := max(2*b.Tick.Seconds(), 0.1)
	if budget > 0 {
		capacity := budget * window
		if p.last.IsZero() {
			p.tokens = capacity
		} else {
			p.tokens = min(p.tokens+budget*b.Now.Sub(p.last).Seconds(), capacity)
		}
		p.last = b.Now
	}
	p.skip = slices.Grow(p.skip[:0], len(entries))[:len(entries)]
	clear(p.skip)
	p.v = slices.Grow(p.v[:0], len(entries))[:len(entries)]
	clear(p.before)
	var twice map[uint32]bool
	if !unique {
		seen := map[uint32]bool{}
		for _, e := range entries {
			s := e.Rec.Slot
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
	for j, e := range entries {
		v := e.Verdict
		p.v[j] = v
		if e.Rec.Type != gameworld.Update || (v != peer.Send && v != peer.Keep) || !e.Placed {
			if o := p.owed[e.Rec.Slot]; o != nil {
				// What it is owed of the object goes first.
				if p.before == nil {
					p.before = map[int]*Owed{}
				}
				p.before[j] = o
				p.take(o)
				forced += len(o.Rec.Encoded())
			}
			if v == peer.Send || v == peer.Reveal {
				// (A hide or keep of an object the peer lacks sends
				// nothing: only what surely goes is counted.)
				forced += len(e.Rec.Encoded())
			}
			continue
		}
		bd := band(j)
		if o := p.owed[e.Rec.Slot]; o != nil {
			o.Rec = peer.Coalesce(o.Rec, e.Rec)
			if v == peer.Send {
				o.Verdict = peer.Send
			}
			if bd < o.band {
				o.band = bd // it came nearer: it waits in its new band
				p.queue(o)
			}
			p.skip[j] = true
			continue
		}
		if bd == 0 && !twice[e.Rec.Slot] {
			fresh = append(fresh, j)
			continue
		}
		// Far, or one of several changes of the object in this flush
		// (folded together, and due at once if near).
		p.owe(e.Rec, v, bd)
		p.skip[j] = true
	}
	if budget > 0 {
		// What cannot wait is sent whatever the budget, and counted; the
		// debt it leaves is at most one window's, so that a burst of
		// adds does not starve the updates for long.
		p.tokens = max(p.tokens-float64(forced), -budget*window)
	}
	fits := func(floor float64) bool { return budget <= 0 || p.tokens > floor }
	send := func(o *Owed) {
		first = append(first, o)
		p.take(o)
		p.tokens -= float64(len(o.Rec.Encoded()))
	}
	// Near objects first, those that waited first, with a quarter of the
	// tick's budget kept for the rest; then the rest by how long they
	// waited for their band; then near ones again if any is left.
	next := 0 // of fresh
	near := func(floor float64) {
		for o := p.peek(0); o != nil && fits(floor); o = p.peek(0) {
			send(o)
		}
		for ; next < len(fresh) && fits(floor); next++ {
			p.tokens -= float64(len(entries[fresh[next]].Rec.Encoded()))
		}
	}
	near(budget * b.Tick.Seconds() / 4)
	for fits(0) {
		var best *Owed
		for bd := 1; bd < len(p.queues); bd++ {
			if o := p.peek(bd); o != nil && o.score(p.tick) >= 1 && (best == nil || o.score(p.tick) > best.score(p.tick)) {
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
		p.owe(entries[j].Rec, p.v[j], 0)
		p.skip[j] = true
	}
	clear(entries) // (the records are the flush's; let them go)
	return first
}

// owe adds an update to what the client is owed, from this tick, in band
// bd.
func (p *Plan) owe(rec *peer.Record, v peer.Verdict, bd int) {
	var o *Owed
	if k := len(p.spare); k > 0 {
		o = p.spare[k-1]
		p.spare[k-1] = nil
		p.spare = p.spare[:k-1]
	} else {
		o = new(Owed)
	}
	*o = Owed{Rec: rec, Verdict: v, since: p.tick, band: bd}
	p.owed[rec.Slot] = o
	p.queue(o)
}

// queue puts o at the end of its band's queue.
func (p *Plan) queue(o *Owed) {
	for len(p.queues) <= o.band {
		p.queues = append(p.queues, owedQueue{})
	}
	q := &p.queues[o.band]
	q.items = append(q.items, o)
	o.queued++
	if q.head > 64 && q.head > len(q.items)/2 {
		q.items = append(q.items[:0:0], q.items[q.head:]...)
		q.head = 0
	}
}

// take removes o from what the client is owed.
func (p *Plan) take(o *Owed) {
	o.done = true
	delete(p.owed, o.Rec.Slot)
}

// peek returns the longest waiting update of band b still owed there, or
// nil.
func (p *Plan) peek(b int) *Owed {
	if b >= len(p.queues) {
		return nil
	}
	q := &p.queues[b]
	for q.head < len(q.items) {
		o := q.items[q.head]
		if !o.done && o.band == b {
			return o
		}
		q.items[q.head] = nil
		q.head++
		if o.queued--; o.done && o.queued == 0 {
			p.retired = append(p.retired, o)
		}
	}
	q.items, q.head = q.items[:0], 0
	return nil
}
