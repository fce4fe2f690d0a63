package scope

import (
	"errors"
	"fmt"
	"sort"
)

// ErrGap is returned for a delta built on a version the replica does not
// hold: it needs the owner's Since(its version), or a snapshot.
var ErrGap = errors.New("scope: a gap before the delta")

// ErrStale is returned for a delta not newer than the replica: nothing
// was applied (applying a delta twice is this).
var ErrStale = errors.New("scope: a delta not newer than the replica")

// EventKind says what happened to an element.
type EventKind uint8

// Kinds of events.
const (
	Added EventKind = iota + 1
	Modified
	Removed
)

func (k EventKind) String() string {
	switch k {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one element's change, as a replica applied it.
type Event struct {
	Kind EventKind
	ID   string
	// Fields holds what changed: all of an added element's fields, the
	// modified ones of a modified element; nil for Removed.
	Fields Fields
}

// Replica is a peer's copy of a scope. It is not safe for concurrent use.
type Replica struct {
	ver   uint64
	elems keyed[uint32] // index in pal
	pal   *palette
}

// NewReplica returns an empty replica at version 0.
func NewReplica() *Replica { return &Replica{pal: newPalette()} }

// Ver returns the version the replica holds.
func (r *Replica) Ver() uint64 { return r.ver }

// Len returns how many elements the replica holds.
func (r *Replica) Len() int { return r.elems.len() }

// Get returns an element's fields (a copy).
func (r *Replica) Get(id string) (Fields, bool) {
	i, ok := r.elems.get(id)
	if !ok {
		return nil, false
	}
	return decode(r.pal.vals[i]), true
}

// IDs returns the ids of the replica's elements, sorted.
func (r *Replica) IDs() []string {
	return sortedIDs(&r.elems)
}

// Apply applies a delta by the seed's rules, calling fn (if not nil) for
// each element it changes: a snapshot replaces the replica; a delta not
// newer than the replica is refused with ErrStale, one built on a version
// newer than the replica's with ErrGap, and nothing changes; otherwise
// removals go first, then additions, then modifications. A modification
// of an element the replica lacks adds it (a delta from Since sends
// changed elements whole).
func (r *Replica) Apply(d Delta, fn func(Event)) error {
	emit := func(e Event) {
		if fn != nil {
			fn(e)
		}
	}
	if d.Full {
		if d.Ver < r.ver {
			return ErrStale
		}
		for _, id := range r.IDs() {
			if _, keep := d.Added[id]; !keep {
				i, _ := r.elems.get(id)
				r.pal.drop(i)
				r.elems.del(id)
				emit(Event{Kind: Removed, ID: id})
			}
		}
		r.ver = d.Ver
		r.put(d.Added, emit)
		return nil
	}
	switch {
	case d.Ver <= r.ver:
		return ErrStale
	case d.Base > r.ver:
		return fmt.Errorf("%w: the delta is built on version %d, the replica holds %d", ErrGap, d.Base, r.ver)
	}
	removed := append([]string(nil), d.Removed...)
	sort.Strings(removed)
	for _, id := range removed {
		if i, ok := r.elems.get(id); ok {
			r.pal.drop(i)
			r.elems.del(id)
			emit(Event{Kind: Removed, ID: id})
		}
	}
	r.put(d.Added, emit)
	r.put(d.Modified, emit)
	r.ver = d.Ver
	return nil
}

// put sets elements' fields (whole for the new ones, merged for the
// others), reporting what changed, in id order.
func (r *Replica) put(m map[string]Fields, emit func(Event)) {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		f := m[id]
		cur, ok := r.elems.get(id)
		if !ok {
			r.elems.put(id, r.pal.add(encode(f)))
			emit(Event{Kind: Added, ID: id, Fields: f})
			continue
		}
		have := decode(r.pal.vals[cur])
		changed := Fields{}
		for k, v := range f {
			if string(compact(have[k])) != string(compact(v)) {
				have[k] = v
				changed[k] = v
			}
		}
		if len(changed) > 0 {
			r.pal.drop(cur)
			r.elems.put(id, r.pal.add(encode(have)))
			emit(Event{Kind: Modified, ID: id, Fields: changed})
		}
	}
}
