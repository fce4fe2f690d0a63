package peer

import (
	"sync"

	"github.com/solipsism/mesh/gameworld"
)

// Record is a change record together with its wire encoding, made at most
// once however many links send it. A Record is immutable.
type Record struct {
	gameworld.Change
	// Slot is the object's slot in its world (gameworld.Object.Slot), which
	// indexes the per-object state of every link's queue.
	Slot uint32
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

// Queue is a link's outbound change queue. It keeps at most one pending
// entry per object, coalescing as the protocol allows (add+update is an
// add, update+update a merged update, add+remove nothing, update+remove a
// remove), so its size is bounded by the number of distinct objects however
// long the link stalls.
//
// The queue also tracks which objects the peer knows (was sent, or sent us),
// so that it never sends a remove of an id the peer never heard of and turns
// an update of an object the peer lacks into a full add.
//
// Per-object state lives in a slice indexed by the object's slot: fan-out
// touches every link for every change, and an index is much cheaper there
// than a hash lookup in hundreds of separate maps.
//
// A Queue is safe for concurrent use.
type Queue struct {
	mu      sync.Mutex
	entries []entry
	order   []uint32 // slots with pending changes, in first-push order
	// orphans are removes still pending for objects whose slot has since
	// been reused by another object.
	orphans []*Record
	// refreshed is set when a refresh answer has been queued; the next
	// drain marks its last frame.
	refreshed bool

	coalesced, dropped uint64
}

// entry is the state of the object in one slot; id is empty when the slot
// holds nothing for this link. known: the peer knows the object once what
// is queued is sent. While queued: knew records whether the peer knew the
// object before the entry was queued, removed whether a remove happened
// since (kept only if it knew), and rec is the pending state if the object
// exists at the end of the sequence.
type entry struct {
	id      string
	known   bool
	queued  bool
	knew    bool
	removed *Record
	rec     *Record
}

// at returns the entry for the object id in slot, making room for it and
// taking the slot over from a removed object if needed. q.mu must be held.
func (q *Queue) at(slot uint32, id string) *entry {
	if int(slot) >= len(q.entries) {
		n := max(int(slot)+1, 2*len(q.entries), 8)
		grown := make([]entry, n)
		copy(grown, q.entries)
		q.entries = grown
	}
	e := &q.entries[slot]
	if e.id != id {
		// The slot's previous object was removed from the world (its remove
		// was pushed before the slot could be reused); keep that remove.
		if e.queued && e.removed != nil {
			q.orphans = append(q.orphans, e.removed)
		}
		*e = entry{id: id, queued: e.queued}
	}
	return e
}

// Push queues r. full, if not nil, returns the object's complete state as an
// add; it is called when r is an update for an object the peer lacks. Push
// reports whether the queue went from empty to non-empty, which is when the
// writer needs waking.
func (q *Queue) Push(r *Record, full func() *Record) (wake bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	knows := int(r.Slot) < len(q.entries) && q.entries[r.Slot].id == r.ID && q.entries[r.Slot].known
	switch r.Type {
	case gameworld.Update:
		if !knows {
			if full == nil {
				q.dropped++
				return false
			}
			if r = full(); r == nil {
				q.dropped++
				return false
			}
		}
	case gameworld.Remove:
		if !knows {
			q.dropped++
			return false
		}
	}
	e := q.at(r.Slot, r.ID)
	if !e.queued {
		wake = len(q.order) == 0 && len(q.orphans) == 0
		e.queued, e.knew = true, e.known
		q.order = append(q.order, r.Slot)
	} else {
		q.coalesced++
	}
	if r.Type == gameworld.Remove {
		e.rec = nil
		if e.knew {
			e.removed = r
		}
		e.known = false
		return wake
	}
	e.rec = merge(e.rec, r)
	e.known = true
	return wake
}

// merge folds next (an add or update) into prev.
func merge(prev, next *Record) *Record {
	if prev == nil {
		return next
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
	return NewRecord(gameworld.Change{Type: typ, ID: next.ID, Owner: next.Owner,
		Properties: prev.Properties.Merge(next.Properties)}, next.Slot)
}

// MarkKnown records that the peer knows the object id in slot (it sent it
// to us).
func (q *Queue) MarkKnown(slot uint32, id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.at(slot, id).known = true
}

// Forget records that the peer no longer has the object id in slot, for
// example because it removed the object itself.
func (q *Queue) Forget(slot uint32, id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if int(slot) < len(q.entries) && q.entries[slot].id == id {
		e := &q.entries[slot]
		e.known = false
		if !e.queued {
			*e = entry{}
		}
	}
}

// Knows reports whether the peer knows the object id in slot, counting what
// is queued.
func (q *Queue) Knows(slot uint32, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int(slot) < len(q.entries) && q.entries[slot].id == id && q.entries[slot].known
}

// MarkRefreshed notes that a complete refresh answer has been queued.
func (q *Queue) MarkRefreshed() {
	q.mu.Lock()
	q.refreshed = true
	q.mu.Unlock()
}

// Len returns the number of objects with pending changes.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order) + len(q.orphans)
}

// Batch is what one drain of a Queue sends: First goes out before Second,
// in a separate message, so that an object removed and created again within
// one tick reaches the peer as a remove followed by a fresh add, never as
// both in one message.
type Batch struct {
	First, Second []*Record
	Refreshed     bool
}

// Empty reports whether the batch sends nothing at all.
func (b *Batch) Empty() bool { return len(b.First) == 0 && len(b.Second) == 0 && !b.Refreshed }

// Drain empties the queue into b, reusing b's slices.
func (q *Queue) Drain(b *Batch) {
	b.First, b.Second = b.First[:0], b.Second[:0]
	q.mu.Lock()
	defer q.mu.Unlock()
	b.First = append(b.First, q.orphans...)
	clear(q.orphans)
	q.orphans = q.orphans[:0]
	for _, slot := range q.order {
		e := &q.entries[slot]
		switch {
		case e.removed != nil && e.rec != nil:
			b.First = append(b.First, e.removed)
			b.Second = append(b.Second, e.rec)
		case e.removed != nil:
			b.First = append(b.First, e.removed)
		case e.rec != nil:
			b.First = append(b.First, e.rec)
		}
		e.queued, e.removed, e.rec = false, nil, nil
		if !e.known {
			*e = entry{}
		}
	}
	b.Refreshed = q.refreshed
	q.refreshed = false
	// Keep a small order slice for reuse; let a big one go so an idle link
	// stays small.
	if cap(q.order) > 256 {
		q.order = nil
	} else {
		q.order = q.order[:0]
	}
}

// Counters returns how many records were coalesced into pending ones and
// how many were dropped because the peer could not need them.
func (q *Queue) Counters() (coalesced, dropped uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.coalesced, q.dropped
}
