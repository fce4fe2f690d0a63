package peer

import (
	"math/bits"
	"sync"

	"github.com/solipsism/mesh/gameworld"
)

// Record is a change record together with its wire encoding, made at most
// once however many links send it. A Record is immutable.
type Record struct {
	gameworld.Change
	// Slot is the object's slot in its world (gameworld.Object.Slot), which
	// indexes what each link knows.
	Slot uint32
	// Born is when the change took effect on this node, in Unix
	// nanoseconds, for delivery latency; zero if unknown.
	Born int64
	once sync.Once
	enc  []byte
}

// NewRecord wraps a change to the object in the given slot for sending.
func NewRecord(c gameworld.Change, slot uint32) *Record { return &Record{Change: c, Slot: slot} }

// Encoded returns the record's JSON encoding. It must not be modified.
func (r *Record) Encoded() []byte {
	r.once.Do(func() { r.enc = AppendChange(nil, r.Change) })
	return r.enc
}

// AsAdd returns the add that gives a peer the whole object r (an add or a
// transfer) describes, with its owner and epoch.
func AsAdd(r *Record) *Record {
	if r.Type == gameworld.Add {
		return r
	}
	a := NewRecord(gameworld.Change{Type: gameworld.Add, ID: r.ID, Owner: r.Owner, Epoch: r.Epoch, Properties: r.Properties}, r.Slot)
	a.Born = r.Born
	return a
}

// Coalesce folds next (an add or update of the same object) into prev, as
// the protocol allows: add+update is an add, update+update one update with
// the later values. prev may be nil.
func Coalesce(prev, next *Record) *Record {
	if prev == nil {
		return next
	}
	if next.Type == gameworld.Transfer {
		// A transfer carries the whole object. To a peer that is still to
		// be sent the object's add, it is that add; an answer stays an
		// answer, as does one coalesced with it.
		switch {
		case prev.Type == gameworld.Add && !next.Answer:
			r := AsAdd(next)
			r.Born = prev.Born
			return r
		case prev.Answer && !next.Answer:
			c := next.Change
			c.Answer = true
			r := NewRecord(c, next.Slot)
			r.Born = next.Born
			return r
		}
		return next
	}
	if prev.Type == gameworld.Transfer {
		r := NewRecord(gameworld.Change{Type: gameworld.Transfer, ID: next.ID, Owner: prev.Owner, Epoch: prev.Epoch,
			PrevOwner: prev.PrevOwner, Properties: prev.Properties.Merge(next.Properties), Answer: prev.Answer}, next.Slot)
		r.Born = prev.Born
		return r
	}
	if prev.Type == gameworld.Update && next.Type == gameworld.Update {
		covers := true
		for k := range prev.Properties {
			if _, ok := next.Properties[k]; !ok {
				covers = false
				break
			}
		}
		if covers {
			return next // shares next's encoding: the common case of a moving object
		}
	}
	typ := gameworld.Update
	if prev.Type == gameworld.Add || next.Type == gameworld.Add {
		typ = gameworld.Add
	}
	r := NewRecord(gameworld.Change{Type: typ, ID: next.ID, Owner: next.Owner, Epoch: max(prev.Epoch, next.Epoch),
		Properties: prev.Properties.Merge(next.Properties)}, next.Slot)
	r.Born = min(prev.Born, next.Born)
	if prev.Born == 0 || next.Born == 0 {
		r.Born = max(prev.Born, next.Born)
	}
	return r
}

// slotSet is a set of slots, one bit each: what a peer knows costs a link
// an eighth of a byte per slot of the world, and worlds reuse their lowest
// free slots, so it follows the world's size rather than its history.
type slotSet []uint64

func (s slotSet) has(slot uint32) bool {
	w := int(slot >> 6)
	return w < len(s) && s[w]&(1<<(slot&63)) != 0
}

func (s *slotSet) add(slot uint32) {
	w := int(slot >> 6)
	if w >= len(*s) {
		if w < cap(*s) {
			*s = (*s)[:w+1]
		} else {
			grown := make(slotSet, w+1, max(w+1, 2*cap(*s), 4))
			copy(grown, *s)
			*s = grown
		}
	}
	(*s)[w] |= 1 << (slot & 63)
}

func (s *slotSet) remove(slot uint32) {
	w := int(slot >> 6)
	if w >= len(*s) {
		return
	}
	(*s)[w] &^= 1 << (slot & 63)
	if w != len(*s)-1 || (*s)[w] != 0 {
		return
	}
	// Trim trailing empty words, and give the memory back once the set
	// has shrunk to a quarter of it (say, after a flood of objects left).
	n := len(*s)
	for n > 0 && (*s)[n-1] == 0 {
		n--
	}
	if n < cap(*s)/4 {
		*s = append(slotSet(nil), (*s)[:n]...)
		return
	}
	*s = (*s)[:n]
}

func (s slotSet) len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// queue holds what a link could not send at once (its writer was busy, or
// its peer asked for less data), coalesced per object as the protocol
// allows: add+update is an add, update+update a merged update, add+remove
// nothing, update+remove a remove. Its size is bounded by the number of
// distinct objects however long the link stalls, and it holds nothing
// while the link keeps up. Guarded by the link's outMu.
type queue struct {
	entries map[uint32]*entry
	order   []uint32 // slots with pending changes, in first-push order
	// orphans are removes still pending for objects whose slot has since
	// been reused by another object.
	orphans []*Record
	// refreshed is set when a refresh answer has been queued; the next
	// drain marks its last frame.
	refreshed bool
}

// entry is the pending state of the object id in one slot: knew records
// whether the peer knew the object before the entry was queued, removed
// whether a remove happened since (kept only if it knew), and rec is the
// pending state if the object exists at the end of the sequence.
type entry struct {
	id      string
	knew    bool
	removed *Record
	rec     *Record
}

func (q *queue) len() int { return len(q.order) + len(q.orphans) }

func (q *queue) empty() bool { return q.len() == 0 && !q.refreshed }

// push queues r; known is the link's set of known slots, updated to what
// the peer will know once the queue is sent.
func (q *queue) push(r *Record, known *slotSet) {
	if q.entries == nil {
		q.entries = make(map[uint32]*entry)
	}
	e := q.entries[r.Slot]
	if e != nil && e.id != r.ID {
		// The slot's previous object was removed from the world (its remove
		// was pushed before the slot could be reused); keep that remove.
		if e.removed != nil {
			q.orphans = append(q.orphans, e.removed)
		}
		e.id, e.removed, e.rec = r.ID, nil, nil
		e.knew = known.has(r.Slot)
	}
	if e == nil {
		e = &entry{id: r.ID, knew: known.has(r.Slot)}
		q.entries[r.Slot] = e
		q.order = append(q.order, r.Slot)
	}
	if r.Type == gameworld.Remove {
		e.rec = nil
		if e.knew {
			e.removed = r
		}
		known.remove(r.Slot)
		return
	}
	e.rec = Coalesce(e.rec, r)
	known.add(r.Slot)
}

// Batch is what one drain of a queue sends: First goes out before Second,
// in a separate message, so that an object removed and created again within
// one tick reaches the peer as a remove followed by a fresh add, never as
// both in one message.
type Batch struct {
	First, Second []*Record
	Refreshed     bool
}

// Empty reports whether the batch sends nothing at all.
func (b *Batch) Empty() bool { return len(b.First) == 0 && len(b.Second) == 0 && !b.Refreshed }

func (b *Batch) reset() {
	clear(b.First)
	clear(b.Second)
	b.First, b.Second, b.Refreshed = b.First[:0], b.Second[:0], false
}

// drain empties the queue into b.
func (q *queue) drain(b *Batch) {
	// An object removed and added again may have come back in another
	// slot (its world gave the old one to another object meanwhile): its
	// add must follow its remove, in the next message.
	var removed map[string]bool
	for _, r := range q.orphans {
		if removed == nil {
			removed = map[string]bool{}
		}
		removed[r.ID] = true
	}
	for _, slot := range q.order {
		if e := q.entries[slot]; e.removed != nil {
			if removed == nil {
				removed = map[string]bool{}
			}
			removed[e.removed.ID] = true
		}
	}
	b.First = append(b.First, q.orphans...)
	for _, slot := range q.order {
		e := q.entries[slot]
		switch {
		case e.removed != nil && e.rec != nil, e.removed == nil && e.rec != nil && removed[e.rec.ID]:
			if e.removed != nil {
				b.First = append(b.First, e.removed)
			}
			b.Second = append(b.Second, e.rec)
		case e.removed != nil:
			b.First = append(b.First, e.removed)
		case e.rec != nil:
			b.First = append(b.First, e.rec)
		}
	}
	b.Refreshed = q.refreshed
	// Nothing is kept: a link that keeps up holds no queue at all.
	*q = queue{}
}
