package peer

import (
	"sync"

	"github.com/solipsism/mesh/gameworld"
)

// Record is a change record together with its wire encoding, made at most
// once however many links send it. A Record is immutable.
type Record struct {
	gameworld.Change
	once sync.Once
	enc  []byte
}

// NewRecord wraps a change for sending.
func NewRecord(c gameworld.Change) *Record { return &Record{Change: c} }

// Encoded returns the record's JSON encoding. It must not be modified.
func (r *Record) Encoded() []byte {
	r.once.Do(func() { r.enc = AppendChange(nil, r.Change) })
	return r.enc
}

// Queue is a link's outbound change queue. It keeps at most one pending
// entry per object id, coalescing as the protocol allows (add+update is an
// add, update+update a merged update, add+remove nothing, update+remove a
// remove), so its size is bounded by the number of distinct objects however
// long the link stalls.
//
// The queue also tracks which ids the peer knows (was sent, or sent us), so
// that it never sends a remove of an id the peer never heard of and turns an
// update of an object the peer lacks into a full add.
//
// A Queue is safe for concurrent use.
type Queue struct {
	mu sync.Mutex
	// entries holds one entry per object the peer knows or that has
	// changes pending: a single map lookup per Push in the steady state.
	entries map[string]*entry
	order   []*entry
	// refreshed is set when a refresh answer has been queued; the next
	// drain marks its last frame.
	refreshed bool

	coalesced, dropped uint64
}

// entry is the state of one id. known: the peer knows the object once what
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

// Push queues r. full, if not nil, returns the object's complete state as an
// add; it is called when r is an update for an object the peer lacks. Push
// reports whether anything was queued.
func (q *Queue) Push(r *Record, full func() *Record) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[r.ID]
	knows := e != nil && e.known
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
	if e == nil {
		if q.entries == nil {
			q.entries = make(map[string]*entry)
		}
		e = &entry{id: r.ID}
		q.entries[r.ID] = e
	}
	if !e.queued {
		e.queued, e.knew = true, e.known
		q.order = append(q.order, e)
	} else {
		q.coalesced++
	}
	if r.Type == gameworld.Remove {
		e.rec = nil
		if e.knew {
			e.removed = r
		}
		e.known = false
		return true
	}
	e.rec = merge(e.rec, r)
	e.known = true
	return true
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
		Properties: prev.Properties.Merge(next.Properties)})
}

// MarkKnown records that the peer knows the object id (it sent it to us).
func (q *Queue) MarkKnown(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[id]
	if e == nil {
		if q.entries == nil {
			q.entries = make(map[string]*entry)
		}
		e = &entry{id: id}
		q.entries[id] = e
	}
	e.known = true
}

// Forget records that the peer no longer has the object id, for example
// because it removed the object itself.
func (q *Queue) Forget(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.entries[id]; e != nil {
		e.known = false
		if !e.queued {
			delete(q.entries, id)
		}
	}
}

// Knows reports whether the peer knows id, counting what is queued.
func (q *Queue) Knows(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[id]
	return e != nil && e.known
}

// MarkRefreshed notes that a complete refresh answer has been queued.
func (q *Queue) MarkRefreshed() {
	q.mu.Lock()
	q.refreshed = true
	q.mu.Unlock()
}

// Len returns the number of ids with pending changes.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
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
	for _, e := range q.order {
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
			delete(q.entries, e.id)
		}
	}
	b.Refreshed = q.refreshed
	q.refreshed = false
	// Keep a small order slice for reuse; let a big one go so an idle link
	// stays small.
	if cap(q.order) > 256 {
		q.order = nil
	} else {
		clear(q.order)
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
