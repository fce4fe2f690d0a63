package gameworld

import (
	"container/heap"
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/solipsism/mesh/scope"
)

// ErrUnknownObject reports an update or remove of an id the world does not
// hold. The wire protocol says such records are ignored; Apply reports them
// so callers can count them.
var ErrUnknownObject = errors.New("unknown object id")

// Object is a snapshot of one GameObject. Its Properties map is shared with
// the world and must not be modified.
type Object struct {
	ID         string
	Owner      string
	Properties Properties
	// Epoch is the ownership epoch (see Change.Epoch).
	Epoch uint64
	// Version counts the records applied to this object, starting at 1.
	Version uint64
	// Created and Updated are when the object was created and last
	// changed, in Unix milliseconds (eight bytes each, where a time.Time
	// takes 24: a world holds many objects).
	Created, Updated int64
	// Slot is a small number unique among the world's current objects,
	// reused after the object is removed: views keep per-object state in
	// slices indexed by it instead of maps.
	Slot uint32
	// Digest is a hash of the object's id, owner, epoch, properties and
	// scopes (see ObjectDigest): two copies of an object are alike when
	// their digests are.
	Digest uint64
	// Scopes are the object's keyed sub-collections, nil if it has none.
	// Every snapshot shares them with the world (see Scopes).
	Scopes *Scopes
	// props is the sum of PropertyHash over the properties, kept as they
	// change.
	props uint64
}

// Authorizer decides whether a change may be applied. existing is the stored
// object the change refers to, or nil when the id is unknown. It runs inside
// Apply with the world locked, after earlier changes of the same batch have
// been applied, so it must not call back into the World. A non-nil error
// refuses the change.
type Authorizer func(c Change, existing *Object) error

// Refusal is a change that Apply did not apply, with the reason.
type Refusal struct {
	Change Change
	Err    error
}

// Applied is the outcome of one Apply call.
type Applied struct {
	// Records are the changes that took effect, in order, normalised and
	// coalesced per id (an update that changed nothing is left out; an add
	// cancelled by a later remove leaves nothing).
	Records []Record
	// Refused lists the changes that were ignored (unknown ids) or refused by
	// the Authorizer. They changed nothing.
	Refused []Refusal
}

// World is a set of GameObjects identified by a world identifier. It is safe
// for concurrent use.
type World struct {
	id  string
	now func() time.Time

	// emitMu is held across applying and notifying so that subscribers see
	// batches in revision order. It is taken before mu.
	emitMu sync.Mutex
	mu     sync.RWMutex
	rev    uint64
	objs   map[string]*Object
	// subs are the subscribers in the order they came: replaced on every
	// Subscribe and cancel, never changed in place, so that Apply reads
	// them without a copy.
	subs   []subscriber
	nextID int
	// free holds the slots of removed objects, for reuse lowest first (a
	// min-heap): after a flood of objects leaves, new objects take low
	// slots again, and what links index by slot stays small.
	free     slotHeap
	nextSlot uint32
	// count and size (the bytes of every property name and value) follow
	// the world for Size, which an Authorizer may call.
	count, size atomic.Int64
	// elems counts the elements of every object's scopes (Elements).
	elems atomic.Int64
	// digests holds, by slot, what RangeDigests reports: a dense array
	// that a pass over every object reads in order, without chasing a
	// pointer per object.
	digests []slotDigest
	// owned is the first slot of each owner's objects, whose slots are
	// chained through digests (prev, next): a digest of what one peer sent
	// (its own few objects, in a world of many) costs what it holds.
	owned map[string]uint32
}

// slotDigest is an object's id, owner and hashes, by slot, and the slots
// of the owner's previous and next objects (noSlot at the ends).
type slotDigest struct {
	obj            *Object // nil for a free slot
	owner          string
	idHash, digest uint64
	prev, next     uint32
}

const noSlot = ^uint32(0)

// noteDigest records o in the dense digest array. w.mu must be held.
func (w *World) noteDigest(o *Object) {
	for int(o.Slot) >= len(w.digests) {
		w.digests = append(w.digests, slotDigest{})
	}
	d := &w.digests[o.Slot]
	if d.obj != nil && d.owner == o.Owner {
		d.obj, d.idHash, d.digest = o, IDHash(o.ID), o.Digest
		return
	}
	if d.obj != nil {
		w.unlink(o.Slot)
	}
	if w.owned == nil {
		w.owned = map[string]uint32{}
	}
	head, ok := w.owned[o.Owner]
	if !ok {
		head = noSlot
	} else {
		w.digests[head].prev = o.Slot
	}
	w.owned[o.Owner] = o.Slot
	*d = slotDigest{obj: o, owner: o.Owner, idHash: IDHash(o.ID), digest: o.Digest, prev: noSlot, next: head}
}

// unlink takes slot out of its owner's chain. w.mu must be held.
func (w *World) unlink(slot uint32) {
	d := &w.digests[slot]
	switch {
	case d.prev != noSlot:
		w.digests[d.prev].next = d.next
	case d.next == noSlot:
		delete(w.owned, d.owner)
	default:
		w.owned[d.owner] = d.next
	}
	if d.next != noSlot {
		w.digests[d.next].prev = d.prev
	}
}

// New returns an empty world with the given identifier.
func New(identifier string) *World {
	return &World{id: identifier, now: time.Now, objs: make(map[string]*Object)}
}

// Identifier returns the world's identifier, used as owner of the objects it
// creates.
func (w *World) Identifier() string { return w.id }

// Revision returns the revision of the latest applied record.
func (w *World) Revision() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.rev
}

// Len returns the number of objects.
func (w *World) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.objs)
}

// Size returns the number of objects and the bytes of all their property
// names and values. Unlike the other methods it takes no lock, so an
// Authorizer may call it (it then includes the batch's changes applied so
// far).
func (w *World) Size() (objects int, bytes int64) {
	return int(w.count.Load()), w.size.Load()
}

// Elements returns how many elements the objects' scopes hold in all. Like
// Size, it takes no lock.
func (w *World) Elements() int { return int(w.elems.Load()) }

// Get returns a snapshot of the object with the given id.
func (w *World) Get(id string) (Object, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	o, ok := w.objs[id]
	if !ok {
		return Object{}, false
	}
	return *o, true
}

// Objects returns snapshots of all objects, sorted by id.
func (w *World) Objects() []Object {
	w.mu.RLock()
	out := make([]Object, 0, len(w.objs))
	for _, o := range w.objs {
		out = append(out, *o)
	}
	w.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Range calls fn for every object, in no particular order, until fn returns
// false. It neither copies nor sorts the world, unlike Objects. The world is
// read-locked meanwhile: fn must not call the World's methods.
func (w *World) Range(fn func(o Object) bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, o := range w.objs {
		if !fn(*o) {
			return
		}
	}
}

// RangeFrom calls fn for every object in a slot from slot on, in slot
// order, until fn returns false; it returns the slot to go on from, and
// whether every slot was visited. Objects added or removed between two
// calls are seen or not as their slots fall. fn must not call back into
// the World.
func (w *World) RangeFrom(slot uint32, fn func(o Object) bool) (next uint32, done bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for i := int(slot); i < len(w.digests); i++ {
		d := &w.digests[i]
		if d.obj != nil && !fn(*d.obj) {
			return uint32(i) + 1, i+1 >= len(w.digests)
		}
	}
	return uint32(len(w.digests)), true
}

// RangeDigests calls fn with every object's slot, owner, IDHash and Digest,
// without copying the objects, until fn returns false. fn must not call
// back into the World.
func (w *World) RangeDigests(fn func(slot uint32, owner string, idHash, digest uint64) bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for slot, d := range w.digests {
		if d.obj != nil && !fn(uint32(slot), d.owner, d.idHash, d.digest) {
			return
		}
	}
}

// RangeDigestsAt is RangeDigests for the objects at the given slots only
// (free slots are skipped): a pass in time proportional to them.
func (w *World) RangeDigestsAt(slots []uint32, fn func(slot uint32, owner string, idHash, digest uint64) bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, slot := range slots {
		if int(slot) >= len(w.digests) {
			continue
		}
		if d := w.digests[slot]; d.obj != nil && !fn(slot, d.owner, d.idHash, d.digest) {
			return
		}
	}
}

// CountOf returns how many objects the given owners own.
func (w *World) CountOf(owners []string) int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	n := 0
	for _, owner := range owners {
		for slot, ok := w.owned[owner]; ok && slot != noSlot; slot = w.digests[slot].next {
			n++
		}
	}
	return n
}

// RangeDigestsOf is RangeDigests for the objects of the given owners only,
// in time proportional to them, in no particular order.
func (w *World) RangeDigestsOf(owners []string, fn func(slot uint32, owner string, idHash, digest uint64) bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, owner := range owners {
		for slot, ok := w.owned[owner]; ok && slot != noSlot; slot = w.digests[slot].next {
			d := &w.digests[slot]
			if !fn(slot, d.owner, d.idHash, d.digest) {
				return
			}
		}
	}
}

// IDsOf appends to ids those of at most max objects of the given owners
// (every one if max is not positive), in time proportional to them, in no
// particular order.
func (w *World) IDsOf(ids []string, owners []string, max int) []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	end := len(ids) + max
	for _, owner := range owners {
		for slot, ok := w.owned[owner]; ok && slot != noSlot; slot = w.digests[slot].next {
			if max > 0 && len(ids) >= end {
				return ids
			}
			ids = append(ids, w.digests[slot].obj.ID)
		}
	}
	return ids
}

// Subscribe registers fn to be called after every Apply that changed
// something. Calls happen in revision order, one at a time, from the
// goroutine that called Apply, after the world's lock is released: fn may
// read the world but must not call Apply (it would deadlock). The returned
// function cancels the subscription.
func (w *World) Subscribe(fn func(Applied)) (cancel func()) {
	w.mu.Lock()
	id := w.nextID
	w.nextID++
	w.subs = append(slices.Clip(w.subs), subscriber{id, fn})
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.subs = slices.DeleteFunc(slices.Clone(w.subs), func(s subscriber) bool { return s.id == id })
		w.mu.Unlock()
	}
}

// subscriber is a function Subscribe registered, with its id.
type subscriber struct {
	id int
	fn func(Applied)
}

// Apply applies a batch of changes in order. auth, when non-nil, is asked
// about every change first. Changes to unknown ids and refused changes are
// reported in Applied.Refused and change nothing.
func (w *World) Apply(changes []Change, auth Authorizer) Applied {
	return w.ApplyInto(nil, changes, auth)
}

// ApplyInto is Apply, the records made in recs's memory: a caller that
// holds a lock of its own around Apply may allocate them before it (the
// records of a batch take at most one each of its changes).
func (w *World) ApplyInto(recs []Record, changes []Change, auth Authorizer) Applied {
	w.emitMu.Lock()
	defer w.emitMu.Unlock()

	w.mu.Lock()
	res := Applied{Records: recs[:0]}
	now := w.now()
	// pos maps an id to its record in res.Records, for coalescing.
	var pos map[string]int
	if len(changes) > 1 {
		pos = make(map[string]int, len(changes))
	}
	// created marks ids created by this batch, so add+remove cancels.
	var created map[string]bool
	for _, c := range changes {
		existing := w.objs[c.ID]
		if auth != nil {
			if err := auth(c, existing); err != nil {
				res.Refused = append(res.Refused, Refusal{Change: c, Err: err})
				continue
			}
		}
		if len(c.Scopes) > 0 && c.Type != Remove {
			var sc *Scopes
			if existing != nil && !(c.Type == Add && c.Owner != existing.Owner && Beats(c.Epoch, c.Owner, existing.Epoch, existing.Owner)) {
				sc = existing.Scopes
			}
			if err := sc.check(c.Scopes); err != nil {
				res.Refused = append(res.Refused, Refusal{Change: c, Err: err})
				continue
			}
		}
		rec, ok := w.applyOne(c, existing, now)
		if !ok {
			res.Refused = append(res.Refused, Refusal{Change: c, Err: ErrUnknownObject})
			continue
		}
		if rec.Type == 0 {
			continue // an update that changed nothing
		}
		if rec.Type == Add {
			if created == nil {
				created = make(map[string]bool)
			}
			created[c.ID] = true
		}
		res.Records = appendCoalesced(res.Records, pos, created, rec)
	}
	if len(res.Records) > 0 {
		res.Records = compact(res.Records)
	}
	var subs []subscriber
	if len(res.Records) > 0 {
		subs = w.subs
	}
	w.mu.Unlock()
	for _, s := range subs {
		s.fn(res)
	}
	return res
}

// applyOne applies c to the world, which must be locked. It returns the
// record, a zero-Type record for an update that changed nothing, or ok=false
// for an update or remove of an unknown id.
func (w *World) applyOne(c Change, o *Object, now time.Time) (rec Record, ok bool) {
	switch c.Type {
	case Add:
		if o != nil {
			if c.Owner != o.Owner && Beats(c.Epoch, c.Owner, o.Epoch, o.Owner) {
				// A claim that wins over the stored one (a mesh node's
				// refresh after a partition healed): the object changes
				// owner, and the add is its whole state.
				c.Type = Transfer
				return w.applyOne(c, o, now)
			}
			// An add of an existing id is an update; the owner never changes.
			return w.update(o, c, now), true
		}
		w.rev++
		props := c.Properties
		if props.IsZero() {
			props = Properties{s: noProperties} // an object has a set, perhaps empty
		}
		var slot uint32
		if len(w.free) > 0 {
			slot = heap.Pop(&w.free).(uint32)
		} else {
			slot = w.nextSlot
			w.nextSlot++
		}
		o = &Object{ID: c.ID, Owner: c.Owner, Properties: props, Epoch: c.Epoch, Version: 1, Created: now.UnixMilli(), Updated: now.UnixMilli(), Slot: slot,
			props: props.Hash()}
		var scopes map[string]scope.Delta
		if len(c.Scopes) > 0 {
			o.Scopes = &Scopes{}
			scopes = w.applyScopes(o, c.Scopes)
		}
		o.Digest = o.digest()
		w.noteDigest(o)
		w.objs[c.ID] = o
		w.count.Add(1)
		w.size.Add(props.Size())
		return Record{Change: Change{Type: Add, ID: c.ID, Owner: c.Owner, Properties: props, Epoch: c.Epoch, Scopes: scopes}, Version: 1, Revision: w.rev, After: props, Slot: slot,
			ObjectScopes: o.Scopes}, true
	case Transfer:
		if o == nil {
			if c.Properties.IsZero() {
				return Record{}, false
			}
			// A transfer carries the whole object: one we lacked arrives
			// as an add.
			c.Type = Add
			return w.applyOne(c, nil, now)
		}
		w.rev++
		prev := o.Owner
		if c.Epoch == 0 && !c.Stated {
			c.Epoch = o.Epoch + 1 // a request: the next epoch
		}
		o.Owner, o.Epoch = c.Owner, c.Epoch
		if !c.Properties.IsZero() {
			w.size.Add(c.Properties.Size() - o.Properties.Size())
			o.Properties = c.Properties
			o.props = o.Properties.Hash()
		}
		if len(c.Scopes) > 0 {
			if o.Scopes == nil {
				o.Scopes = &Scopes{}
			}
			w.applyScopes(o, c.Scopes)
		}
		o.Digest = o.digest()
		w.noteDigest(o)
		o.Version++
		o.Updated = now.UnixMilli()
		// A transfer carries the whole object, its scopes too.
		return Record{Change: Change{Type: Transfer, ID: o.ID, Owner: o.Owner, Properties: o.Properties, Epoch: o.Epoch, PrevOwner: prev, Scopes: o.Scopes.Snapshots()},
			Version: o.Version, Revision: w.rev, After: o.Properties, Slot: o.Slot, ObjectScopes: o.Scopes}, true
	case Update:
		if o == nil {
			return Record{}, false
		}
		return w.update(o, c, now), true
	case Remove:
		if o == nil {
			return Record{}, false
		}
		w.rev++
		delete(w.objs, c.ID)
		w.count.Add(-1)
		w.size.Add(-o.Properties.Size())
		if o.Scopes != nil {
			n, b := o.Scopes.Size()
			w.size.Add(-b)
			w.elems.Add(-int64(n))
		}
		w.unlink(o.Slot)
		w.digests[o.Slot] = slotDigest{}
		if n := len(w.digests); int(o.Slot) == n-1 {
			// Trim unused slots at the end, and let a flood's memory go.
			for n > 0 && w.digests[n-1].obj == nil {
				n--
			}
			w.digests = w.digests[:n]
			if cap(w.digests) > 1024 && n < cap(w.digests)/4 {
				w.digests = append([]slotDigest(nil), w.digests...)
			}
		}
		if len(w.objs) == 0 {
			// Empty: every slot is free again, and the heap's memory goes.
			w.free, w.nextSlot, w.digests, w.owned = nil, 0, nil, nil
		} else {
			heap.Push(&w.free, o.Slot)
		}
		return Record{Change: Change{Type: Remove, ID: c.ID, Owner: o.Owner}, Version: o.Version + 1, Revision: w.rev, Slot: o.Slot}, true
	}
	return Record{}, false
}

// update merges c's properties into o, keeping only values that differ,
// and applies c's scope changes.
func (w *World) update(o *Object, c Change, now time.Time) Record {
	scopes := c.Scopes
	if len(scopes) > 0 && o.Scopes == nil {
		o.Scopes = &Scopes{}
	}
	scopes = w.applyScopes(o, scopes)
	d := c.prep
	if !c.PreparedFor(o) {
		d = diff(o, c.Properties)
	}
	w.size.Add(d.grown)
	if d.delta.Empty() && len(scopes) == 0 {
		return Record{}
	}
	o.props = d.hash
	o.Digest = o.digest()
	w.noteDigest(o)
	w.rev++
	if !d.delta.Empty() {
		o.Properties = d.merged
	}
	o.Version++
	o.Updated = now.UnixMilli()
	return Record{Change: Change{Type: Update, ID: o.ID, Owner: o.Owner, Properties: d.delta, Epoch: o.Epoch, Scopes: scopes}, Version: o.Version, Revision: w.rev, After: o.Properties, Slot: o.Slot,
		ObjectScopes: o.Scopes}
}

// applyScopes applies scope changes to o (checked before) and returns what
// changed, keeping the world's size; the world is locked.
func (w *World) applyScopes(o *Object, deltas map[string]scope.Delta) map[string]scope.Delta {
	if len(deltas) == 0 {
		return nil
	}
	n0, before := o.Scopes.Size()
	out, _ := o.Scopes.apply(deltas) // (checked: an error is a bad field, which decoders refuse)
	n1, after := o.Scopes.Size()
	w.size.Add(after - before)
	w.elems.Add(int64(n1 - n0))
	return out
}

// digest computes o's Digest; the world is locked.
func (o *Object) digest() uint64 {
	return ObjectDigest(IDHash(o.ID), o.Owner, o.Epoch, o.props+o.Scopes.hash())
}

// IDHash returns the hash of the object's id (the package's IDHash), by
// which digests put it in buckets. (Computed, not kept: an object costs
// eight bytes less.)
func (o Object) IDHash() uint64 { return IDHash(o.ID) }

// appendCoalesced appends rec to recs, folding it into an earlier record for
// the same id where the protocol allows. Folded-away slots are left with a
// zero Type and removed by compact.
func appendCoalesced(recs []Record, pos map[string]int, created map[string]bool, rec Record) []Record {
	if pos == nil {
		return append(recs, rec)
	}
	i, seen := pos[rec.ID]
	if !seen || recs[i].Type == 0 {
		pos[rec.ID] = len(recs)
		return append(recs, rec)
	}
	prev := &recs[i]
	switch {
	case prev.Type == Transfer && rec.Type == Update:
		// A transfer carries the whole object: it takes the update in.
		prev.Properties = rec.After
		prev.Scopes = MergeScopes(prev.Scopes, rec.Scopes)
		prev.Version, prev.Revision, prev.After, prev.Slot = rec.Version, rec.Revision, rec.After, rec.Slot
		return recs
	case prev.Type != Remove && rec.Type == Update:
		// add+update stays an add; update+update merges.
		prev.Properties = prev.Properties.Merge(rec.Properties)
		prev.Scopes = MergeScopes(prev.Scopes, rec.Scopes)
		prev.Version, prev.Revision, prev.After, prev.Slot = rec.Version, rec.Revision, rec.After, rec.Slot
		return recs
	case prev.Type == Add && rec.Type == Remove && created[rec.ID]:
		// Created and removed within the batch: nobody needs to hear of it.
		prev.Type = 0
		delete(created, rec.ID)
		return recs
	case prev.Type == Update && rec.Type == Remove:
		*prev = rec
		return recs
	}
	// remove followed by add: both must be seen, in order.
	pos[rec.ID] = len(recs)
	return append(recs, rec)
}

func compact(recs []Record) []Record {
	out := recs[:0]
	for _, r := range recs {
		if r.Type != 0 {
			out = append(out, r)
		}
	}
	return out
}

// slotHeap is a min-heap of free slots.
type slotHeap []uint32

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h slotHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)        { *h = append(*h, x.(uint32)) }
func (h *slotHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	if cap(*h) > 1024 && len(*h) < cap(*h)/4 {
		*h = append(slotHeap(nil), *h...) // let a flood's memory go
	}
	return x
}
