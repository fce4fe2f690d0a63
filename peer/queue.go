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
	// ObjectScopes are the object's scopes (gameworld.Record's), which a
	// peer that takes no scope deltas is sent whole; nil if it has none.
	ObjectScopes *gameworld.Scopes
	once         sync.Once
	enc          []byte
	legacyOnce   sync.Once
	legacy       []byte
	entryOnce    sync.Once
	entry        []byte
	// names are the names of the record's properties
	// (gameworld.Properties.Names), read when first asked for: the
	// clients of a crowd that wait for one far update and are handed the
	// next each ask whether it names all the first one did (Coalesce).
	namesOnce sync.Once
	names     string
}

// NewRecord wraps a change to the object in the given slot for sending.
func NewRecord(c gameworld.Change, slot uint32) *Record { return &Record{Change: c, Slot: slot} }

// Encoded returns the record's JSON encoding. It must not be modified.
func (r *Record) Encoded() []byte {
	r.once.Do(func() { r.enc = AppendChange(nil, r.Change) })
	return r.enc
}

// propertyNames returns the names of the record's properties, as
// gameworld.Properties.Names.
func (r *Record) propertyNames() string {
	r.namesOnce.Do(func() { r.names = r.Properties.Names() })
	return r.names
}

// EncodedFor returns the record's encoding for a peer that takes scope
// deltas (scopes true) or not: for the latter, a record that changes
// scopes carries each whole, as an ordinary property, read when first
// asked for. It must not be modified.
func (r *Record) EncodedFor(scopes bool) []byte {
	if scopes || len(r.Scopes) == 0 || r.Type == gameworld.Remove {
		return r.Encoded()
	}
	r.legacyOnce.Do(func() { r.legacy = appendLegacyChange(nil, r.Change, r.ObjectScopes) })
	return r.legacy
}

// scopeEntry returns the record's entry in a scopeChange (it must be
// scopesOnly), encoded when first asked for. It must not be modified.
func (r *Record) scopeEntry() []byte {
	r.entryOnce.Do(func() { r.entry = appendScopeEntry(nil, r) })
	return r.entry
}

// withScopes makes r carry the scopes' changes and holder of the records
// it was made from.
func (r *Record) withScopes(prev, next *Record) *Record {
	r.Scopes = gameworld.MergeScopes(prev.Scopes, next.Scopes)
	r.ObjectScopes = next.ObjectScopes
	if r.ObjectScopes == nil {
		r.ObjectScopes = prev.ObjectScopes
	}
	return r
}

// AsAdd returns the add that gives a peer the whole object r (an add or a
// transfer) describes, with its owner and epoch.
func AsAdd(r *Record) *Record {
	if r.Type == gameworld.Add {
		return r
	}
	a := NewRecord(gameworld.Change{Type: gameworld.Add, ID: r.ID, Owner: r.Owner, Epoch: r.Epoch, Properties: r.Properties, Scopes: r.Scopes}, r.Slot)
	a.Born, a.ObjectScopes = r.Born, r.ObjectScopes
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
			r.Born, r.ObjectScopes = next.Born, next.ObjectScopes
			return r
		}
		return next
	}
	if prev.Type == gameworld.Transfer {
		r := NewRecord(gameworld.Change{Type: gameworld.Transfer, ID: next.ID, Owner: prev.Owner, Epoch: prev.Epoch,
			PrevOwner: prev.PrevOwner, Properties: prev.Properties.Merge(next.Properties), Answer: prev.Answer}, next.Slot)
		r.Born = prev.Born
		return r.withScopes(prev, next)
	}
	if prev.Type == gameworld.Update && next.Type == gameworld.Update {
		if len(prev.Scopes) == 0 && (prev.propertyNames() == next.propertyNames() || next.Properties.Covers(prev.Properties)) {
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
	return r.withScopes(prev, next)
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
	// order lists the entries by when they last became pending: an entry
	// changed again after a slice was drained moves to the end. Positions
	// whose entry has gone, or moved, are stale and skipped; order[:head]
	// are all stale, order[fresh:] came after the last slice.
	order       []qpos
	head, fresh int
	nextAt      uint64
	// orphans are removes still pending for objects whose slot has since
	// been reused by another object.
	orphans []*Record
	// removes maps the ids of pending removes to their slots, so that a
	// slice that sends an id's add in another slot sends its remove too.
	removes map[string]uint32
	// refreshed is set when a refresh answer has been queued; beforeMark
	// counts the entries queued before it that are still pending: the
	// drain that sends the last of them marks its last frame.
	refreshed  bool
	beforeMark int
	refreshSeq uint64
	// announce is set when worlds left the chain while the queue was
	// being sent (Link.Announce); beforeAnnounce counts the entries queued
	// before that which are still pending: the slice that sends the last
	// of them is followed by the metadata that drops those worlds.
	announce       bool
	beforeAnnounce int
	announceSeq    uint64
	// nextSeq numbers entries in the order they were first pushed.
	nextSeq uint64
}

// qpos is a position in a queue's order: entry e (in slot), if it is
// still in that queue and its at is still at. (The entry itself, not its
// slot, so that walking the order looks nothing up: a crowd's busy links
// drain their queues every tick.)
type qpos struct {
	e    *entry
	slot uint32
	at   uint64
}

// entry is the pending state of the object id in one slot: knew records
// whether the peer knew the object before the entry was queued, removed
// whether a remove happened since (kept only if it knew), and rec is the
// pending state if the object exists at the end of the sequence.
type entry struct {
	id      string
	seq, at uint64
	// in is the queue that holds the entry; nil once taken out.
	in      *queue
	knew    bool
	removed *Record
	rec     *Record
}

func (q *queue) len() int { return len(q.entries) + len(q.orphans) }

// place puts e (in slot) at the end of the order.
func (q *queue) place(slot uint32, e *entry) {
	e.at = q.nextAt
	q.nextAt++
	q.order = append(q.order, qpos{e, slot, e.at})
}

// at returns the entry at position p, or nil if p is stale.
func (q *queue) at(p qpos) *entry {
	if p.e.in == q && p.e.at == p.at {
		return p.e
	}
	return nil
}

// push queues r; known is the link's set of known slots, updated to what
// the peer will know once the queue is sent. It reports whether r folded
// into what was pending for its object.
func (q *queue) push(r *Record, known *slotSet) (coalesced bool) {
	if q.entries == nil {
		q.entries = make(map[uint32]*entry)
	}
	e := q.entries[r.Slot]
	coalesced = e != nil && e.id == r.ID
	if e != nil && e.id != r.ID {
		// The slot's previous object was removed from the world (its remove
		// was pushed before the slot could be reused); keep that remove.
		if e.removed != nil {
			q.orphans = append(q.orphans, e.removed)
			q.forgetRemove(e.removed.ID, r.Slot)
		}
		if q.refreshed && e.seq < q.refreshSeq {
			q.beforeMark-- // what it owed the refresh answer is the orphan
		}
		if q.announce && e.seq < q.announceSeq {
			q.beforeAnnounce-- // the orphan goes in the next slice
		}
		e.id, e.removed, e.rec = r.ID, nil, nil
		e.knew = known.has(r.Slot)
		e.seq = q.nextSeq
		q.nextSeq++
		q.place(r.Slot, e)
	}
	if e == nil {
		e = &entry{id: r.ID, seq: q.nextSeq, in: q, knew: known.has(r.Slot)}
		q.nextSeq++
		q.entries[r.Slot] = e
		q.place(r.Slot, e)
	} else if q.fresh > 0 && q.indexOf(e) < q.fresh {
		// Changed again since the last slice: live, not backlog.
		q.place(r.Slot, e)
	}
	if r.Type == gameworld.Remove {
		e.rec = nil
		if e.knew {
			e.removed = r
			if q.removes == nil {
				q.removes = make(map[string]uint32)
			}
			q.removes[r.ID] = r.Slot
		}
		known.remove(r.Slot)
		return coalesced
	}
	e.rec = Coalesce(e.rec, r)
	known.add(r.Slot)
	return coalesced
}

// forget drops what is pending for object id in slot: the peer removes
// the object itself (Forget). Its position in the order goes stale.
func (q *queue) forget(slot uint32, id string) {
	e := q.entries[slot]
	if e == nil || e.id != id {
		return
	}
	q.takeOut(slot, e)
}

// takeOut removes e (in slot) from the queue, sent or dropped: the marks
// no longer wait for it, and its pending remove is no longer pending.
func (q *queue) takeOut(slot uint32, e *entry) {
	delete(q.entries, slot)
	e.in = nil
	if q.refreshed && e.seq < q.refreshSeq {
		q.beforeMark--
	}
	if q.announce && e.seq < q.announceSeq {
		q.beforeAnnounce--
	}
	if e.removed != nil {
		q.forgetRemove(e.removed.ID, slot)
	}
}

// indexOf returns the index in q.order of e's position (found by binary
// search: positions are in increasing at).
func (q *queue) indexOf(e *entry) int {
	lo, hi := q.head, len(q.order)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if q.order[m].at < e.at {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (q *queue) forgetRemove(id string, slot uint32) {
	if s, ok := q.removes[id]; ok && s == slot {
		delete(q.removes, id)
	}
}

// Batch is what one drain of a queue sends: First goes out before Second,
// in a separate message, so that an object removed and created again within
// one tick reaches the peer as a remove followed by a fresh add, never as
// both in one message.
type Batch struct {
	First, Second []*Record
	Refreshed     bool
	// Announce: the link's chain metadata follows the records.
	Announce bool
}

// Empty reports whether the batch sends nothing at all.
func (b *Batch) Empty() bool {
	return len(b.First) == 0 && len(b.Second) == 0 && !b.Refreshed && !b.Announce
}

func (b *Batch) reset() {
	clear(b.First)
	clear(b.Second)
	b.First, b.Second, b.Refreshed, b.Announce = b.First[:0], b.Second[:0], false, false
}

// markRefreshed marks the end of a refresh answer: every entry queued so far
// belongs to it.
func (q *queue) markRefreshed() {
	q.refreshed = true
	q.refreshSeq = q.nextSeq
	q.beforeMark = len(q.entries)
}

// markAnnounce marks that chain metadata must follow every entry queued so
// far (a later mark extends an earlier one).
func (q *queue) markAnnounce() {
	q.announce = true
	q.announceSeq = q.nextSeq
	q.beforeAnnounce = len(q.entries)
}

// liveEntries is how many entries an owner may have among those that came
// since the last slice for them to count as live rather than bulk.
const liveEntries = 16

// drainSlice moves at most max entries of the queue into b (all of them if
// max is not positive) and reports whether entries are left. A queue that
// has fallen behind by a burst (a flood, a large refresh answer) is sent a
// slice at a time, so that what arrives meanwhile still coalesces into it
// (an add and the remove that follows cancel out), and each slice takes
// first what changed since the last one, of owners with few such changes:
// live changes of other peers overtake the bulk of one, which then goes
// oldest first. Order is kept where the protocol needs it: a remove of an
// id goes in the slice of, or before, its add in another slot; removes of
// reused slots go in the next slice; the refresh marker goes with the
// slice that sends the last entry queued before it.
func (q *queue) drainSlice(b *Batch, max int) (more bool) {
	if max <= 0 || len(q.entries) <= max {
		q.drain(b)
		return false
	}
	slice := getQueue()
	defer putQueue(slice)
	slice.orphans = q.orphans
	q.orphans = nil
	var take func(slot uint32, e *entry)
	take = func(slot uint32, e *entry) {
		q.takeOut(slot, e)
		e.in = slice
		slice.entries[slot] = e
		slice.order = append(slice.order, qpos{e, slot, e.at})
		if e.rec != nil {
			if s, ok := q.removes[e.rec.ID]; ok && s != slot {
				if r := q.entries[s]; r != nil {
					take(s, r)
				}
			}
		}
	}
	fresh := q.order[q.fresh:]
	owners := make(map[string]int)
	for _, p := range fresh {
		if e := q.at(p); e != nil {
			owners[e.owner()]++
		}
	}
	for _, p := range fresh {
		if len(slice.entries) >= max {
			break
		}
		if e := q.at(p); e != nil && owners[e.owner()] <= liveEntries {
			take(p.slot, e)
		}
	}
	for i := q.head; i < len(q.order) && len(slice.entries) < max; i++ {
		if e := q.at(q.order[i]); e != nil {
			take(q.order[i].slot, e)
		}
	}
	for q.head < len(q.order) && q.at(q.order[q.head]) == nil {
		q.head++
	}
	if q.head > len(q.order)/2 {
		q.order = append(q.order[:0:0], q.order[q.head:]...)
		q.head = 0
	}
	q.fresh = len(q.order)
	if q.refreshed && q.beforeMark <= 0 {
		slice.refreshed, q.refreshed = true, false
	}
	if q.announce && q.beforeAnnounce <= 0 {
		slice.announce, q.announce = true, false
	}
	slice.drain(b)
	return q.len() > 0 || q.refreshed || q.announce
}

// owner is the owner of the entry's pending change.
func (e *entry) owner() string {
	switch {
	case e.rec != nil:
		return e.rec.Owner
	case e.removed != nil:
		return e.removed.Owner
	}
	return ""
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
	for _, p := range q.order[q.head:] {
		if e := q.at(p); e != nil && e.removed != nil {
			if removed == nil {
				removed = map[string]bool{}
			}
			removed[e.removed.ID] = true
		}
	}
	b.First = append(b.First, q.orphans...)
	for _, p := range q.order[q.head:] {
		e := q.at(p)
		if e == nil {
			continue
		}
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
	b.Announce = q.announce
	q.reset()
}

// reset empties q, keeping its memory for reuse (see putQueue).
func (q *queue) reset() {
	clear(q.entries)
	clear(q.order)
	*q = queue{entries: q.entries, order: q.order[:0]}
}

// queues holds emptied queues for reuse: a link that stays busy (its
// writer still writing when the next tick's records come) opens a queue
// every tick, and growing its map from nothing to the tick's objects each
// time cost more than the records' coalescing. A link that keeps up holds
// no queue at all; what waits here is the pool's, released by the garbage
// collector when unused.
var queues = sync.Pool{New: func() any { return new(queue) }}

// maxPooledEntries bounds the queues kept for reuse: one that held a
// burst lets its memory go.
const maxPooledEntries = 16384

func getQueue() *queue {
	q := queues.Get().(*queue)
	if q.entries == nil {
		q.entries = make(map[uint32]*entry)
	}
	return q
}

// putQueue returns an emptied queue (reset) for reuse.
func putQueue(q *queue) {
	if cap(q.order) > maxPooledEntries || q.len() > 0 {
		return
	}
	queues.Put(q)
}
