package scope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits bound what DecodeDelta accepts. The zero value means the
// defaults.
type Limits struct {
	// MaxElements bounds the elements one delta names. Zero means 65,536.
	MaxElements int
	// MaxIDBytes bounds an element id. Zero means 256.
	MaxIDBytes int
	// MaxFields bounds an element's fields. Zero means 64.
	MaxFields int
}

// MarshalJSON encodes a delta as AppendJSON does.
func (d Delta) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil), nil }

// AppendJSON appends d's encoding:
// {"ver":…,"base":…,"added":{id:{field:value}},"modified":{…},"removed":[…]}
// ("full":true for a snapshot; empty collections left out, and base too
// when it is ver-1, as it nearly always is, or the delta is a snapshot or
// of ver 0);
// ids and field names sorted, values compact, as encoding/json writes
// them with HTML escaping off. It is written by hand, without reflection, because a delta is
// encoded for each peer it goes to.
func (d Delta) AppendJSON(dst []byte) []byte {
	dst = strconv.AppendUint(append(dst, `{"ver":`...), d.Ver, 10)
	if !d.Full && d.Ver != 0 && d.Base+1 != d.Ver { // (ver 0 is numbered by its receiver: no base)
		dst = strconv.AppendUint(append(dst, `,"base":`...), d.Base, 10)
	}
	if len(d.Added) > 0 {
		dst = appendElements(append(dst, `,"added":`...), d.Added)
	}
	if len(d.Modified) > 0 {
		dst = appendElements(append(dst, `,"modified":`...), d.Modified)
	}
	if len(d.Removed) > 0 {
		dst = append(dst, `,"removed":[`...)
		for i, id := range d.Removed {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendKey(dst, id)
		}
		dst = append(dst, ']')
	}
	if d.Full {
		dst = append(dst, `,"full":true`...)
	}
	return append(dst, '}')
}

// appendElements appends {id:{field:value,…},…}, ids sorted.
func appendElements(dst []byte, m map[string]Fields) []byte {
	dst = append(dst, '{')
	for i, id := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendKey(dst, id), ':')
		if m[id] == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = appendFields(dst, m[id])
	}
	return append(dst, '}')
}

// appendFields appends {field:value,…}, names sorted, values compact.
func appendFields(dst []byte, f Fields) []byte {
	var arr [8]string
	keys := arr[:0]
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendKey(dst, k), ':')
		dst = append(dst, compact(f[k])...)
	}
	return append(dst, '}')
}

// DecodeDelta decodes a delta, refusing what breaks the limits: a missing
// ver, a base past ver, an id empty or too long or named twice, a field
// that is not JSON, anything after the delta. Field values come out
// compact; they share one copy of b (a delta's values are stored or
// encoded elsewhere, not kept one by one).
//
// It is written by hand over jsontext's tokenizer because a grid arrives
// as one delta of tens of thousands of elements: decoding it by
// reflection cost the node about forty times the message's size.
func (l Limits) DecodeDelta(b []byte) (Delta, error) {
	d, err := l.decodeDelta(b)
	if err != nil {
		return Delta{}, fmt.Errorf("scope: not a delta: %w", err)
	}
	return d, nil
}

func (l Limits) decodeDelta(b []byte) (Delta, error) {
	if l.MaxElements <= 0 {
		l.MaxElements = 1 << 16
	}
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = 256
	}
	if l.MaxFields <= 0 {
		l.MaxFields = 64
	}
	r := deltaReader{lim: l, buf: bytes.Clone(b), names: map[string]string{}}
	r.dec = jsontext.NewDecoder(bytes.NewBuffer(r.buf), jsontext.AllowDuplicateNames(true))
	var d Delta
	var hasVer, hasBase bool
	if err := r.object(func(key []byte) error {
		switch string(key) {
		case "ver":
			hasVer = true
			return r.uint(&d.Ver)
		case "base":
			hasBase = true
			return r.uint(&d.Base)
		case "added":
			return r.elements(&d.Added)
		case "modified":
			return r.elements(&d.Modified)
		case "removed":
			return r.removed(&d.Removed)
		case "full":
			v, err := r.dec.ReadValue()
			if err != nil {
				return err
			}
			switch v.Kind() {
			case 't':
				d.Full = true
			case 'f', 'n':
				d.Full = false
			default:
				return fmt.Errorf("full is not a boolean")
			}
			return nil
		}
		return fmt.Errorf("unknown field %q", key)
	}); err != nil {
		return Delta{}, err
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		return Delta{}, fmt.Errorf("data after the delta")
	}
	if !hasVer {
		return Delta{}, fmt.Errorf("a delta needs ver")
	}
	if !hasBase && d.Ver > 0 {
		d.Base = d.Ver - 1 // (the default)
	}
	if d.Base > d.Ver {
		return Delta{}, fmt.Errorf("base %d is past ver %d", d.Base, d.Ver)
	}
	if d.Full && (len(d.Modified) > 0 || len(d.Removed) > 0) {
		return Delta{}, fmt.Errorf("a snapshot holds added elements only")
	}
	for id := range d.Modified {
		if _, ok := d.Added[id]; ok {
			return Delta{}, fmt.Errorf("element %q named twice", id)
		}
	}
	// An element removed and added again in one delta is allowed: the
	// removal goes first.
	seen := make(map[string]bool, len(d.Removed))
	for _, id := range d.Removed {
		if _, ok := d.Modified[id]; ok || seen[id] {
			return Delta{}, fmt.Errorf("element %q named twice", id)
		}
		seen[id] = true
	}
	return d, nil
}

// deltaReader reads a delta's parts from one copy of its bytes.
type deltaReader struct {
	lim   Limits
	dec   *jsontext.Decoder
	buf   []byte
	n     int               // elements so far
	names map[string]string // field names, one string each
}

// object reads an object (or null), calling fn with each raw name, its
// quotes off, to read the value that follows.
func (r *deltaReader) object(fn func(name []byte) error) error {
	if ok, err := r.open('{'); !ok {
		return err
	}
	for r.dec.PeekKind() == '"' {
		name, err := r.str()
		if err != nil {
			return err
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	_, err := r.dec.ReadToken() // '}', or the error that stopped the names
	return err
}

// open reads null (false) or the start of an object or array (want).
func (r *deltaReader) open(want jsontext.Kind) (bool, error) {
	switch k := r.dec.PeekKind(); k {
	case 'n', want:
		_, err := r.dec.ReadToken()
		return err == nil && k == want, err
	case 0:
		_, err := r.dec.ReadToken() // (the error)
		return false, err
	default:
		return false, fmt.Errorf("want %v, got %v", want, k)
	}
}

// str reads a string, unquoted.
func (r *deltaReader) str() ([]byte, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	return jsontext.AppendUnquote(nil, v)
}

// value reads a JSON value, compact, as a slice of buf.
func (r *deltaReader) value() (json.RawMessage, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	end := int(r.dec.InputOffset())
	raw := json.RawMessage(r.buf[end-len(v) : end : end])
	return compact(raw), nil
}

func (r *deltaReader) uint(dst *uint64) error {
	v, err := r.dec.ReadValue()
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not a version", v)
	}
	*dst = n
	return nil
}

// id checks an element id's limits.
func (r *deltaReader) id(raw []byte) (string, error) {
	if r.n++; r.n > r.lim.MaxElements {
		return "", fmt.Errorf("over %d elements", r.lim.MaxElements)
	}
	if len(raw) == 0 || len(raw) > r.lim.MaxIDBytes {
		return "", fmt.Errorf("element id %q: 1 to %d bytes of UTF-8", raw, r.lim.MaxIDBytes)
	}
	return string(raw), nil
}

func (r *deltaReader) elements(dst *map[string]Fields) error {
	return r.object(func(raw []byte) error {
		id, err := r.id(raw)
		if err != nil {
			return err
		}
		if *dst == nil {
			*dst = map[string]Fields{}
		}
		if _, dup := (*dst)[id]; dup {
			return fmt.Errorf("element %q named twice", id)
		}
		var f Fields
		if r.dec.PeekKind() != 'n' {
			f = make(Fields, 1)
		}
		if err := r.object(func(name []byte) error {
			if len(f) == r.lim.MaxFields {
				return fmt.Errorf("element %q has over %d fields", id, r.lim.MaxFields)
			}
			k, ok := r.names[string(name)]
			if !ok {
				k = string(name)
				r.names[k] = k
			}
			v, err := r.value()
			if err != nil {
				return err
			}
			f[k] = v
			return nil
		}); err != nil {
			return err
		}
		(*dst)[id] = f
		return nil
	})
}

func (r *deltaReader) removed(dst *[]string) error {
	if ok, err := r.open('['); !ok {
		return err
	}
	for r.dec.PeekKind() == '"' {
		raw, err := r.str()
		if err != nil {
			return err
		}
		id, err := r.id(raw)
		if err != nil {
			return err
		}
		*dst = append(*dst, id)
	}
	t, err := r.dec.ReadToken()
	if err == nil && t.Kind() != ']' {
		err = fmt.Errorf("removed holds %v, not an id", t.Kind())
	}
	return err
}

// UnmarshalJSON decodes a delta as DecodeDelta does, with room for the
// largest scopes (a store's snapshots): 1,048,576 elements.
func (d *Delta) UnmarshalJSON(b []byte) error {
	got, err := Limits{MaxElements: 1 << 20}.DecodeDelta(b)
	if err != nil {
		return err
	}
	*d = got
	return nil
}
