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
	mu      sync.Mutex
	known   map[string]struct{}
	pending map[string]*slot
	order   []*slot
	// refreshed is set when a refresh answer has been queued; the next
	// drain marks its last frame.
	refreshed bool

	coalesced, dropped uint64
}

// slot is the pending state of one id. knew records whether the peer knew
// the object before the slot began; removed whether a remove happened since
// (relevant only if it knew). rec is the object's pending state if it exists
// at the end of the sequence.
type slot struct {
	id      string
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
	_, knows := q.known[r.ID]
	switch r.Type {
	case gameworld.Update:
		if !knows {
			if full == nil {
				q.dropped++
				return false
			}
			r = full()
			if r == nil {
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
	s := q.pending[r.ID]
	if s == nil {
		if q.pending == nil {
			q.pending = make(map[string]*slot)
		}
		s = &slot{id: r.ID, knew: knows}
		q.pending[r.ID] = s
		q.order = append(q.order, s)
	} else {
		q.coalesced++
	}
	if r.Type == gameworld.Remove {
		s.rec = nil
		if s.knew {
			s.removed = r
		}
		delete(q.known, r.ID)
		return true
	}
	s.rec = merge(s.rec, r)
	if q.known == nil {
		q.known = make(map[string]struct{})
	}
	q.known[r.ID] = struct{}{}
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
	if q.known == nil {
		q.known = make(map[string]struct{})
	}
	q.known[id] = struct{}{}
	q.mu.Unlock()
}

// Forget records that the peer no longer has the object id, for example
// because it removed the object itself.
func (q *Queue) Forget(id string) {
	q.mu.Lock()
	delete(q.known, id)
	q.mu.Unlock()
}

// Knows reports whether the peer knows id, counting what is queued.
func (q *Queue) Knows(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.known[id]
	return ok
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
	for _, s := range q.order {
		switch {
		case s.removed != nil && s.rec != nil:
			b.First = append(b.First, s.removed)
			b.Second = append(b.Second, s.rec)
		case s.removed != nil:
			b.First = append(b.First, s.removed)
		case s.rec != nil:
			b.First = append(b.First, s.rec)
		}
	}
	b.Refreshed = q.refreshed
	q.refreshed = false
	// Keep small tables for reuse; let big ones go so an idle link stays small.
	if len(q.order) > 64 {
		q.pending, q.order = nil, nil
	} else {
		clear(q.pending)
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
