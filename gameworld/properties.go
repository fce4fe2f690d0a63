package gameworld

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"unsafe"
)

// Properties is an immutable set of named raw JSON values: an object's
// properties, or the properties a change sets.
//
// It is one string of entries sorted by name, each the name's length
// (uvarint), the name, the value's length (uvarint) and the value; the
// empty set is the one byte 0 (no entry starts so and ends there). A
// world holds many small objects: three small properties take about 50
// bytes here where a Go map takes about 400, and an object is one
// allocation to read, copy to the wire or hash. Lookups scan (objects have
// few properties); merges walk both sets in order.
//
// The zero Properties is "none given" (a change that sets no properties,
// a remove); an empty set is not zero (see IsZero). Properties are never
// modified once made, so they may be shared freely; the values they
// return must not be modified.
type Properties struct {
	s string
}

// noProperties is the empty, non-zero set.
const noProperties = "\x00"

// PropertiesOf returns m as Properties: the zero Properties for a nil map,
// the empty set for an empty one. m is not retained.
func PropertiesOf(m map[string]json.RawMessage) Properties {
	if m == nil {
		return Properties{}
	}
	var b PropertiesBuilder
	for k, v := range m {
		b.Add(k, v)
	}
	return b.Build()
}

// IsZero reports whether p is the zero Properties ("none given"), as
// opposed to a set, perhaps empty.
func (p Properties) IsZero() bool { return p.s == "" }

// Len returns the number of properties in p.
func (p Properties) Len() int {
	n := 0
	for i, b := 0, p.entries(); i < len(b); n++ {
		i = skip(b, i)
	}
	return n
}

// Empty reports whether p has no properties (zero or an empty set).
func (p Properties) Empty() bool { return len(p.s) <= 1 }

// Get returns the value of the named property and whether p has it.
func (p Properties) Get(name string) (json.RawMessage, bool) {
	for i, b := 0, p.entries(); i < len(b); {
		k, v, next := entry(b, i)
		if k == name {
			return v, true
		}
		if k > name {
			break
		}
		i = next
	}
	return nil, false
}

// Value returns the value of the named property, nil if p has none.
func (p Properties) Value(name string) json.RawMessage {
	v, _ := p.Get(name)
	return v
}

// All yields p's properties in name order.
func (p Properties) All() iter.Seq2[string, json.RawMessage] {
	return func(yield func(string, json.RawMessage) bool) {
		for i, b := 0, p.entries(); i < len(b); {
			k, v, next := entry(b, i)
			if !yield(k, v) {
				return
			}
			i = next
		}
	}
}

// Map returns p as a new map, nil for the zero Properties.
func (p Properties) Map() map[string]json.RawMessage {
	if p.IsZero() {
		return nil
	}
	m := make(map[string]json.RawMessage, p.Len())
	for k, v := range p.All() {
		m[k] = v
	}
	return m
}

// Hash returns the sum of PropertyHash over p: the same for equal
// properties, and kept up to date property by property as they change.
func (p Properties) Hash() uint64 {
	var h uint64
	for k, v := range p.All() {
		h += PropertyHash(k, v)
	}
	return h
}

// Size returns the bytes of p's names and values.
func (p Properties) Size() int64 {
	var n int64
	for k, v := range p.All() {
		n += int64(len(k) + len(v))
	}
	return n
}

// Equal reports whether p and q hold the same names and values (the zero
// Properties equals the empty set).
func (p Properties) Equal(q Properties) bool { return p.entries() == q.entries() }

// Merge returns p overlaid with q: q's values win. It is the zero
// Properties only when both are.
func (p Properties) Merge(q Properties) Properties {
	switch {
	case q.Empty() && !p.IsZero():
		return p
	case p.Empty() && !q.IsZero():
		return q
	case p.IsZero() && q.IsZero():
		return Properties{}
	}
	size := 0
	p.merge(q, func(e string) { size += len(e) })
	out := make([]byte, 0, size) // exact: an object holds the result
	p.merge(q, func(e string) { out = append(out, e...) })
	return Properties{s: unsafe.String(unsafe.SliceData(out), len(out))} // (out is never written again)
}

// merge calls emit with each entry of p overlaid with q, in name order.
func (p Properties) merge(q Properties, emit func(entry string)) {
	p.join(q, func(pe, qe string) bool {
		if qe != "" {
			emit(qe)
		} else {
			emit(pe)
		}
		return true
	})
}

// join calls fn with the entries of p and q in name order, an entry of
// each for a name both have, "" for the side without it, until fn
// returns false.
func (p Properties) join(q Properties, fn func(pe, qe string) bool) {
	a, b := p.entries(), q.entries()
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var pk, qk string
		var pn, qn int
		if i < len(a) {
			pk, _, pn = entry(a, i)
		}
		if j < len(b) {
			qk, _, qn = entry(b, j)
		}
		var ok bool
		switch {
		case j == len(b) || (i < len(a) && pk < qk):
			ok, i = fn(a[i:pn], ""), pn
		case i == len(a) || pk > qk:
			ok, j = fn("", b[j:qn]), qn
		default:
			ok, i, j = fn(a[i:pn], b[j:qn]), pn, qn
		}
		if !ok {
			return
		}
	}
}

// Names returns p's names as one string, each name's length then the
// name, in order: two sets of properties have the same names exactly
// when their Names are equal.
func (p Properties) Names() string {
	var b []byte
	for i, s := 0, p.entries(); i < len(s); {
		name, _, next := entry(s, i)
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		i = next
	}
	return string(b)
}

// Covers reports whether p has every name q has.
func (p Properties) Covers(q Properties) bool {
	covers := true
	p.join(q, func(pe, qe string) bool {
		covers = pe != "" || qe == ""
		return covers
	})
	return covers
}

// Shared returns how many of p's properties q names too, and their bytes
// (names and values) in p.
func (p Properties) Shared(q Properties) (n int, size int64) {
	p.join(q, func(pe, qe string) bool {
		if pe != "" && qe != "" {
			k, v, _ := entry(pe, 0)
			n, size = n+1, size+int64(len(k)+len(v))
		}
		return true
	})
	return n, size
}

// With returns p with the named property set to v.
func (p Properties) With(name string, v json.RawMessage) Properties {
	var b PropertiesBuilder
	b.Add(name, v)
	return p.Merge(b.Build())
}

// Without returns p without the named properties.
func (p Properties) Without(names ...string) Properties {
	var b PropertiesBuilder
	for k, v := range p.All() {
		if !slices.Contains(names, k) {
			b.Add(k, v)
		}
	}
	return b.Build()
}

// String returns p as JSON, for logs and test failures.
func (p Properties) String() string {
	b, _ := p.MarshalJSON()
	return string(b)
}

// MarshalJSON encodes p as a JSON object, names in order; the zero
// Properties is null.
func (p Properties) MarshalJSON() ([]byte, error) {
	if p.IsZero() {
		return []byte("null"), nil
	}
	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	for k, v := range p.All() {
		if !first {
			sb.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(k)
		sb.Write(name)
		sb.WriteByte(':')
		sb.Write(v)
	}
	sb.WriteByte('}')
	return []byte(sb.String()), nil
}

// UnmarshalJSON decodes a JSON object into p (null: the zero Properties).
func (p *Properties) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	*p = PropertiesOf(m)
	return nil
}

// entries returns p's entries, without the empty set's marker.
func (p Properties) entries() string {
	if len(p.s) <= 1 {
		return ""
	}
	return p.s
}

// entry decodes the entry of b at offset i: its name, its value and the
// offset of the next. The value shares b's bytes, which never change (a
// string's), as a slice no append can write through.
func entry(b string, i int) (name string, value json.RawMessage, next int) {
	n, w := uvarint(b[i:])
	i += w
	name = b[i : i+n]
	i += n
	n, w = uvarint(b[i:])
	i += w
	end := i + n
	return name, json.RawMessage(unsafe.Slice(unsafe.StringData(b[i:]), n)), end
}

// skip returns the offset of the entry of b after the one at i.
func skip(b string, i int) int {
	n, w := uvarint(b[i:])
	i += w + n
	n, w = uvarint(b[i:])
	return i + w + n
}

// uvarint is binary.Uvarint for the well-formed strings Properties holds.
func uvarint(s string) (int, int) {
	var x, shift uint
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 {
			return int(x | uint(c)<<shift), i + 1
		}
		x |= uint(c&0x7f) << shift
		shift += 7
	}
	return 0, len(s)
}

// A PropertiesBuilder collects properties, in any order, into Properties.
// Of two values given for one name the later wins. The zero value is
// ready to use; a builder may be reused after Build.
type PropertiesBuilder struct {
	ents []builderEntry
	buf  []byte
}

type builderEntry struct {
	name, value [2]int // offsets into buf: start, end
	seq         int
}

// Add adds a property; name and value are copied.
func (b *PropertiesBuilder) Add(name string, value []byte) {
	b.AddBytes(unsafe.Slice(unsafe.StringData(name), len(name)), value)
}

// AddBytes is Add with the name as bytes (read, not retained).
func (b *PropertiesBuilder) AddBytes(name, value []byte) {
	s := len(b.buf)
	b.buf = append(b.buf, name...)
	m := len(b.buf)
	b.buf = append(b.buf, value...)
	b.ents = append(b.ents, builderEntry{name: [2]int{s, m}, value: [2]int{m, len(b.buf)}, seq: len(b.ents)})
}

// Len returns the number of properties added since the last Build.
func (b *PropertiesBuilder) Len() int { return len(b.ents) }

// Build returns the properties added (an empty set if none) and resets b.
func (b *PropertiesBuilder) Build() Properties {
	name := func(e builderEntry) []byte { return b.buf[e.name[0]:e.name[1]] }
	slices.SortFunc(b.ents, func(x, y builderEntry) int {
		if c := bytes.Compare(name(x), name(y)); c != 0 {
			return c
		}
		return x.seq - y.seq
	})
	kept := b.ents[:0]
	for i, e := range b.ents {
		if i+1 < len(b.ents) && bytes.Equal(name(e), name(b.ents[i+1])) {
			continue // the later value wins
		}
		kept = append(kept, e)
	}
	size := 0
	for _, e := range kept {
		n, v := e.name[1]-e.name[0], e.value[1]-e.value[0]
		size += uvarintLen(n) + n + uvarintLen(v) + v
	}
	if size == 0 {
		b.ents, b.buf = b.ents[:0], b.buf[:0]
		return Properties{s: noProperties}
	}
	out := make([]byte, 0, size) // exact: every object holds its own
	for _, e := range kept {
		out = binary.AppendUvarint(out, uint64(e.name[1]-e.name[0]))
		out = append(out, name(e)...)
		out = binary.AppendUvarint(out, uint64(e.value[1]-e.value[0]))
		out = append(out, b.buf[e.value[0]:e.value[1]]...)
	}
	b.ents, b.buf = b.ents[:0], b.buf[:0]
	if cap(b.buf) > 64<<10 {
		b.buf = nil // a pooled builder keeps no large record's memory
	}
	return Properties{s: unsafe.String(unsafe.SliceData(out), len(out))} // (out is never written again)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}
