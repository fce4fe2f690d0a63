package scope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Apply applies a delta that arrived from elsewhere (a peer that owns the
// scope) to s, by the seed's rules, and returns what it changed: a delta
// from s's version before to its version after, holding only the elements
// and fields whose values changed (none if nothing did: then Ver and Base
// are equal for a delta s numbered, and Ver is the delta's own otherwise,
// so that copies further on follow the version).
//
//   - d.Ver 0 asks s to number the change itself: it becomes the next
//     version (an owner's own edit, without a Scope of its own).
//   - A snapshot (d.Full) replaces the scope, whatever its version: an
//     owner that restarted numbers its scope anew. What it changed is
//     returned as a delta (elements replaced are removed and added), or,
//     for a snapshot not newer than s, as a snapshot, so that every copy
//     downstream is replaced alike.
//   - Otherwise a delta not newer than s is refused with ErrStale and one
//     built on a version newer than s's with ErrGap; nothing changes.
//     Removals go first, then additions (an added element replaces one of
//     the same id whole), then modifications (merged into the element, or
//     creating it).
//
// Unlike Set and Remove, Apply closes its change at once: it is not part
// of the next Tick's delta.
func (s *Scope) Apply(d Delta) (Delta, error) {
	for _, m := range []map[string]Fields{d.Added, d.Modified} {
		for id, f := range m {
			for k, v := range f {
				if !json.Valid(v) {
					return Delta{}, fmt.Errorf("%w: %s of %s", ErrBadField, k, id)
				}
			}
		}
	}
	ver := d.Ver
	switch {
	case ver == 0:
		ver = s.ver + 1
	case d.Full:
	case ver <= s.ver:
		return Delta{}, fmt.Errorf("%w: version %d, the scope holds %d", ErrStale, ver, s.ver)
	case d.Base > s.ver:
		return Delta{}, fmt.Errorf("%w: the delta is built on version %d, the scope holds %d", ErrGap, d.Base, s.ver)
	}
	if ver >= math.MaxUint32 {
		return Delta{}, ErrTooManyVersions
	}
	out := Delta{Base: s.ver, Ver: ver}
	if d.Full {
		renumbered := ver <= s.ver
		for _, id := range sortedIDs(&s.elems) {
			if _, keep := d.Added[id]; !keep {
				s.drop(id, ver)
				out.Removed = append(out.Removed, id)
			}
		}
		for id, f := range d.Added {
			existed := s.Has(id)
			if s.put(id, f, true, ver) == nil {
				continue
			}
			if existed {
				out.Removed = append(out.Removed, id)
			}
			if out.Added == nil {
				out.Added = make(map[string]Fields, len(d.Added))
			}
			out.Added[id] = f
		}
		sort.Strings(out.Removed)
		s.ver = ver
		if renumbered {
			// Not newer: copies downstream must be replaced whole too.
			return s.Snapshot(), nil
		}
		return out, nil
	}
	note := func(m *map[string]Fields, id string, f Fields) {
		if *m == nil {
			*m = map[string]Fields{}
		}
		(*m)[id] = f
	}
	removed := append([]string(nil), d.Removed...)
	sort.Strings(removed)
	gone := map[string]bool{}
	for _, id := range removed {
		if s.drop(id, ver) {
			out.Removed = append(out.Removed, id)
			gone[id] = true
		}
	}
	for id, f := range d.Added {
		existed := s.Has(id)
		if changed := s.put(id, f, true, ver); changed == nil {
			continue
		} else if existed && !gone[id] {
			// Replaced whole: downstream copies hold the old one, which a
			// removal and an addition in one delta replace alike.
			out.Removed = append(out.Removed, id)
		}
		note(&out.Added, id, f)
	}
	for id, f := range d.Modified {
		existed := s.Has(id)
		changed := s.put(id, f, false, ver)
		switch {
		case changed == nil:
		case !existed:
			note(&out.Added, id, s.fields(id))
		case out.Added[id] != nil:
			out.Added[id] = s.fields(id)
		default:
			note(&out.Modified, id, changed)
		}
	}
	sort.Strings(out.Removed)
	if out.Empty() && d.Ver == 0 {
		return Delta{Base: s.ver, Ver: s.ver}, nil // nothing to number
	}
	// A delta of the owner's that changes nothing here (a queue composed
	// an element's addition and removal, say) still advances the version,
	// and the empty delta returned carries that on: the owner's next
	// delta is built on it.
	s.ver = ver
	return out, nil
}

// Has reports whether the scope holds element id.
func (s *Scope) Has(id string) bool { _, ok := s.elems.get(id); return ok }

func (s *Scope) fields(id string) Fields { return decode(s.pal.vals[s.elem(id).val]) }

// drop removes an element at version ver, remembering it for Since.
func (s *Scope) drop(id string, ver uint64) bool {
	e, ok := s.elems.get(id)
	if !ok {
		return false
	}
	s.size -= int64(len(id) + len(s.pal.vals[e.val]))
	s.sum -= elemHash(id, s.pal.vals[e.val])
	s.pal.drop(e.val)
	s.elems.del(id)
	delete(s.dirty, id)
	delete(s.added, id)
	s.tombs[id] = ver
	s.trimTombs()
	return true
}

// put sets an element's fields at version ver, whole (replacing it) or
// merged, and returns the fields whose values changed (nil if none did).
func (s *Scope) put(id string, f Fields, whole bool, ver uint64) Fields {
	e, ok := s.elems.get(id)
	var enc []byte
	changed := f
	if whole {
		// (Replaced whole: what changed is f, as a new element's fields
		// are; no copies.)
		if f == nil {
			changed = Fields{} // an element with no fields is still an element
		}
		enc = encode(f)
	} else {
		cur := Fields{}
		if ok {
			cur = decode(s.pal.vals[e.val])
		}
		changed = Fields{}
		for k, v := range f {
			if c, had := cur[k]; had && bytes.Equal(compact(c), compact(v)) {
				continue
			}
			cur[k] = v
			changed[k] = v
		}
		enc = encode(cur)
	}
	if ok {
		old := s.pal.vals[e.val]
		if old == string(enc) {
			return nil
		}
		s.size -= int64(len(id) + len(old))
		s.sum -= elemHash(id, old)
		s.pal.drop(e.val)
	}
	s.elems.put(id, elem{val: s.pal.add(enc), ver: uint32(ver)})
	s.size += int64(len(id) + len(enc))
	s.sum += elemHash(id, string(enc))
	delete(s.tombs, id)
	return changed
}

// Sum is the sum of the scope's elements' hashes (see ElementHash): equal
// for equal contents whatever the order they came in, and kept as they
// change.
func (s *Scope) Sum() uint64 { return s.sum }

// Size is the bytes of the scope's element ids and their encodings: what
// its JSON object (AppendJSON) takes, less punctuation.
func (s *Scope) Size() int64 { return s.size }

// Sum is, for a snapshot, what Scope.Sum is for the scope it holds: the
// sum of its elements' hashes.
func (d Delta) Sum() uint64 {
	var h uint64
	for id, f := range d.Added {
		h += elemHash(id, string(encode(f)))
	}
	return h
}

// ElementHash is the FNV-1a hash (64 bits) of an element's id, a zero byte
// and its encoding: its fields as a JSON object, keys sorted, compact.
func ElementHash(id string, enc []byte) uint64 { return elemHash(id, string(enc)) }

func elemHash(id, enc string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	h *= prime // the zero byte
	for i := 0; i < len(enc); i++ {
		h ^= uint64(enc[i])
		h *= prime
	}
	return h
}

// AppendJSON appends the scope's elements as one JSON object, ids sorted:
// {"id":{"field":value,…},…}. It is what a peer that does not know scopes
// is sent as an ordinary property.
func (s *Scope) AppendJSON(dst []byte) []byte {
	ids := sortedIDs(&s.elems)
	dst = append(dst, '{')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendKey(dst, id)
		dst = append(dst, ':')
		dst = append(dst, s.pal.vals[s.elem(id).val]...)
	}
	return append(dst, '}')
}

// FromJSON returns a snapshot holding the elements of a JSON object of
// AppendJSON's form, at version ver: how a scope written as an ordinary
// property (by a peer that does not know scopes) is taken.
func FromJSON(b []byte, ver uint64) (Delta, error) {
	var m map[string]Fields
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return Delta{}, fmt.Errorf("scope: not an object of elements: %s", firstBytes(b))
	}
	return Delta{Ver: ver, Full: true, Added: m}, nil
}

func firstBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// appendKey appends id as a JSON string, as encoding/json writes it with
// HTML escaping off.
func appendKey(dst []byte, id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			var b bytes.Buffer
			e := json.NewEncoder(&b)
			e.SetEscapeHTML(false)
			e.Encode(id) //nolint:errcheck // a string
			return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, id...)
	return append(dst, '"')
}

func sortedIDs[V any](m *keyed[V]) []string {
	out := make([]string, 0, m.len())
	for id := range m.all() {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
