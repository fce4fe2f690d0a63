package scope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Fields are an element's fields: name to JSON value.
type Fields map[string]json.RawMessage

// Delta is the change of a scope from version Base to version Ver.
type Delta struct {
	// Ver is the scope's version after the delta; Base the version it was
	// built on (the replica must hold Base, or newer).
	Ver, Base uint64
	// Added holds new elements, whole; Modified the fields that changed
	// of existing ones; Removed the ids of elements that went.
	Added, Modified map[string]Fields
	Removed         []string
	// Full marks a snapshot: the scope holds exactly Added afterwards.
	Full bool
}

// Empty reports whether the delta changes nothing.
func (d Delta) Empty() bool {
	return len(d.Added) == 0 && len(d.Modified) == 0 && len(d.Removed) == 0 && !d.Full
}

// elem is a stored element: its fields' encoding in the scope's
// palette, and the version that last changed it. Eight bytes, so that a
// block costs little more than its key.
type elem struct {
	val uint32
	ver uint32
}

// palette holds the distinct encodings of elements (each a compact JSON
// object), counted: the blocks of a grid are mostly a few kinds (stone,
// air, grass), each stored once however many blocks hold it, as voxel
// engines' chunk palettes do. An encoding no element holds any longer is
// freed.
type palette struct {
	vals  []string
	refs  []uint32
	index map[string]uint32
	free  []uint32
}

func newPalette() *palette { return &palette{index: map[string]uint32{}} }

// add returns the index of an encoding, counting one more holder.
func (p *palette) add(b []byte) uint32 {
	if i, ok := p.index[string(b)]; ok {
		p.refs[i]++
		return i
	}
	v := string(b)
	var i uint32
	if n := len(p.free); n > 0 {
		i, p.free = p.free[n-1], p.free[:n-1]
		p.vals[i], p.refs[i] = v, 1
	} else {
		i = uint32(len(p.vals))
		p.vals, p.refs = append(p.vals, v), append(p.refs, 1)
	}
	p.index[v] = i
	return i
}

// drop counts one holder fewer of an encoding.
func (p *palette) drop(i uint32) {
	if p.refs[i]--; p.refs[i] == 0 {
		delete(p.index, p.vals[i])
		p.vals[i] = ""
		p.free = append(p.free, i)
	}
}

// Scope is the owner's copy of a keyed sub-collection. It is not safe for
// concurrent use: its owner serialises access (as a node does under its
// lock).
type Scope struct {
	ver   uint64
	elems keyed[elem]
	pal   *palette
	// dirty holds, for elements changed since the last Tick, the fields
	// that changed (nil: added, whole) ; removed, those removed.
	dirty   map[string]map[string]bool
	added   map[string]bool
	removed map[string]bool
	// tombs are removals with the version they happened at, for Since;
	// removals older than horizon are forgotten (Since then says so).
	tombs   map[string]uint64
	horizon uint64
	// MaxTombs bounds the removals kept for Since. Zero means 65,536.
	MaxTombs int
	// size and sum follow the elements (Size, Sum).
	size int64
	sum  uint64
}

// New returns an empty scope at version 0.
func New() *Scope {
	return &Scope{pal: newPalette(), dirty: map[string]map[string]bool{}, added: map[string]bool{},
		removed: map[string]bool{}, tombs: map[string]uint64{}}
}

// Ver returns the scope's version: the number of ticks that changed it.
func (s *Scope) Ver() uint64 { return s.ver }

// Len returns how many elements the scope holds.
func (s *Scope) Len() int { return s.elems.len() }

// Get returns an element's fields (a copy).
func (s *Scope) Get(id string) (Fields, bool) {
	e, ok := s.elems.get(id)
	if !ok {
		return nil, false
	}
	return decode(s.pal.vals[e.val]), true
}

// ErrTooManyVersions is returned once a scope has changed 2³²-1 times:
// elements keep their versions in 32 bits.
var ErrTooManyVersions = errors.New("scope: the scope has changed 2^32-1 times")

// ErrBadField is returned for a field value that is not JSON.
var ErrBadField = errors.New("scope: a field is not JSON")

// Set creates an element or changes some of its fields, marking them
// dirty. A field set to the value it holds changes nothing.
func (s *Scope) Set(id string, f Fields) error {
	for k, v := range f {
		if !json.Valid(v) {
			return fmt.Errorf("%w: %s of %s", ErrBadField, k, id)
		}
	}
	if s.ver >= math.MaxUint32-1 {
		return ErrTooManyVersions
	}
	e, ok := s.elems.get(id)
	if !ok {
		enc := encode(f)
		s.elems.put(id, elem{val: s.pal.add(enc), ver: uint32(s.ver + 1)})
		s.size += int64(len(id) + len(enc))
		s.sum += elemHash(id, string(enc))
		// (Removed earlier in this tick, it stays so: the delta removes the
		// old one before it adds this, leaving none of its fields.)
		s.added[id] = true
		delete(s.dirty, id)
		return nil
	}
	cur := decode(s.pal.vals[e.val])
	changed := false
	for k, v := range f {
		c, had := cur[k]
		if had && bytes.Equal(compact(c), compact(v)) {
			continue
		}
		cur[k] = v
		changed = true
		if !s.added[id] {
			if s.dirty[id] == nil {
				s.dirty[id] = map[string]bool{}
			}
			s.dirty[id][k] = true
		}
	}
	if changed {
		old, enc := s.pal.vals[e.val], encode(cur)
		s.size += int64(len(enc) - len(old))
		s.sum += elemHash(id, string(enc)) - elemHash(id, old)
		s.pal.drop(e.val)
		s.elems.put(id, elem{val: s.pal.add(enc), ver: uint32(s.ver + 1)})
	}
	return nil
}

// Remove removes an element.
func (s *Scope) Remove(id string) {
	e, ok := s.elems.get(id)
	if !ok {
		return
	}
	s.size -= int64(len(id) + len(s.pal.vals[e.val]))
	s.sum -= elemHash(id, s.pal.vals[e.val])
	s.pal.drop(e.val)
	s.elems.del(id)
	delete(s.dirty, id)
	if s.added[id] {
		delete(s.added, id) // came and went within the tick: nothing to tell
		return
	}
	s.removed[id] = true
}

// Tick closes the changes since the last tick into a delta from the
// current version to the next, which it advances to; nothing changed, it
// returns an empty delta and the version stays.
func (s *Scope) Tick() Delta {
	if len(s.added) == 0 && len(s.dirty) == 0 && len(s.removed) == 0 {
		return Delta{Ver: s.ver, Base: s.ver}
	}
	d := Delta{Base: s.ver, Ver: s.ver + 1}
	s.ver++
	for id := range s.added {
		if d.Added == nil {
			d.Added = map[string]Fields{}
		}
		d.Added[id] = decode(s.pal.vals[s.elem(id).val])
	}
	for id, fields := range s.dirty {
		cur := decode(s.pal.vals[s.elem(id).val])
		patch := Fields{}
		for k := range fields {
			patch[k] = cur[k]
		}
		if d.Modified == nil {
			d.Modified = map[string]Fields{}
		}
		d.Modified[id] = patch
	}
	for id := range s.removed {
		d.Removed = append(d.Removed, id)
		s.tombs[id] = s.ver
	}
	sort.Strings(d.Removed)
	// (Maps keep their buckets when cleared: after a big tick, the
	// grid's first fill say, fresh ones let the memory go.)
	for _, m := range []*map[string]bool{&s.added, &s.removed} {
		if len(*m) > 1024 {
			*m = map[string]bool{}
		} else {
			clear(*m)
		}
	}
	if len(s.dirty) > 1024 {
		s.dirty = map[string]map[string]bool{}
	} else {
		clear(s.dirty)
	}
	s.trimTombs()
	return d
}

func (s *Scope) trimTombs() {
	max := s.MaxTombs
	if max <= 0 {
		max = 1 << 16
	}
	if len(s.tombs) <= max {
		return
	}
	// Forget the older half: Since a version before them needs a snapshot.
	vers := make([]uint64, 0, len(s.tombs))
	for _, v := range s.tombs {
		vers = append(vers, v)
	}
	sort.Slice(vers, func(i, j int) bool { return vers[i] < vers[j] })
	cut := vers[len(vers)/2]
	for id, v := range s.tombs {
		if v <= cut {
			delete(s.tombs, id)
		}
	}
	s.horizon = cut
}

// Since returns a self-contained delta from version base to the current
// one: every element changed after base, whole, and every removal after
// base. ok is false if base is older than the
// removals the scope remembers: send a Snapshot instead.
func (s *Scope) Since(base uint64) (d Delta, ok bool) {
	if base > s.ver {
		return Delta{}, false
	}
	if base == 0 {
		return s.Snapshot(), true
	}
	if base < s.horizon {
		return Delta{}, false
	}
	d = Delta{Base: base, Ver: s.ver}
	// Elements changed in the tick not yet closed come as they are now,
	// and again in that tick's delta: applying a change twice is harmless.
	for id, e := range s.elems.all() {
		if uint64(e.ver) <= base {
			continue
		}
		if d.Modified == nil {
			d.Modified = map[string]Fields{}
		}
		// Whole: the replica may lack any of its fields' changes, or the
		// element itself (then it takes this as an add).
		d.Modified[id] = decode(s.pal.vals[e.val])
	}
	for id, v := range s.tombs {
		if v > base {
			d.Removed = append(d.Removed, id)
		}
	}
	sort.Strings(d.Removed)
	return d, true
}

// Snapshot returns the whole scope, as it is now, at the current version
// (what changed since the last Tick comes again in the next delta).
func (s *Scope) Snapshot() Delta {
	d := Delta{Ver: s.ver, Full: true, Added: make(map[string]Fields, s.elems.len())}
	for id, e := range s.elems.all() {
		d.Added[id] = decode(s.pal.vals[e.val])
	}
	return d
}

func encode(f Fields) []byte {
	n := 2
	for k, v := range f {
		n += len(k) + len(v) + 4
	}
	return appendFields(make([]byte, 0, n), f)
}

// decode reads an element's fields from their encoding (encode's: keys
// sorted, values compact) with a scan of its own, without reflection: a
// scope's elements are decoded at every change of theirs.
func decode[T string | []byte](data T) Fields {
	s := string(data)
	f := Fields{}
	for i := 1; i < len(s)-1; {
		j := stringEnd(s, i)
		key := s[i+1 : j-1]
		if strings.IndexByte(key, '\\') >= 0 {
			json.Unmarshal([]byte(s[i:j]), &key) //nolint:errcheck // encode made it
		}
		i = j + 1 // past ':'
		j = valueEnd(s, i)
		f[key] = json.RawMessage(s[i:j])
		i = j + 1 // past ',' or '}'
	}
	return f
}

// stringEnd returns the index just past the JSON string starting at s[i].
func stringEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(s)
}

// valueEnd returns the index just past the compact JSON value at s[i].
func valueEnd(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"':
			j = stringEnd(s, j) - 1
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // a scalar ended with its object
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		}
	}
	return len(s)
}

func compact(v json.RawMessage) []byte {
	if !hasSpace(v) {
		return v // (values come compact, nearly always)
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}

// hasSpace reports whether v holds a byte JSON counts as whitespace.
func hasSpace(v []byte) bool {
	for _, c := range v {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}
