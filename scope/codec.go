package scope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
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

type wireDelta struct {
	Ver      *uint64           `json:"ver"`
	Base     *uint64           `json:"base,omitempty"`
	Added    map[string]Fields `json:"added,omitempty"`
	Modified map[string]Fields `json:"modified,omitempty"`
	Removed  []string          `json:"removed,omitempty"`
	Full     bool              `json:"full,omitempty"`
}

// MarshalJSON encodes a delta as
// {"ver":…,"base":…,"added":{id:{field:value}},"modified":{…},"removed":[…]}
// ("full":true for a snapshot; empty collections left out, and base too
// when it is ver-1, as it nearly always is, or the delta is a snapshot).
func (d Delta) MarshalJSON() ([]byte, error) {
	v := d.Ver
	w := wireDelta{Ver: &v, Added: d.Added, Modified: d.Modified, Removed: d.Removed, Full: d.Full}
	if !d.Full && d.Base+1 != d.Ver {
		b := d.Base
		w.Base = &b
	}
	return json.Marshal(w)
}

// DecodeDelta decodes a delta, refusing what breaks the limits: a missing
// ver, a base past ver, an id empty or too long or named twice, a field
// that is not JSON.
func (l Limits) DecodeDelta(b []byte) (Delta, error) {
	if l.MaxElements <= 0 {
		l.MaxElements = 1 << 16
	}
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = 256
	}
	if l.MaxFields <= 0 {
		l.MaxFields = 64
	}
	var w wireDelta
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Delta{}, fmt.Errorf("scope: not a delta: %w", err)
	}
	if w.Ver == nil {
		return Delta{}, fmt.Errorf("scope: a delta needs ver")
	}
	d := Delta{Ver: *w.Ver, Added: w.Added, Modified: w.Modified, Removed: w.Removed, Full: w.Full}
	switch {
	case w.Base != nil:
		d.Base = *w.Base
	case d.Ver > 0:
		d.Base = d.Ver - 1 // (the default)
	}
	if d.Base > d.Ver {
		return Delta{}, fmt.Errorf("scope: base %d is past ver %d", d.Base, d.Ver)
	}
	if d.Full && (len(d.Modified) > 0 || len(d.Removed) > 0) {
		return Delta{}, fmt.Errorf("scope: a snapshot holds added elements only")
	}
	if n := len(d.Added) + len(d.Modified) + len(d.Removed); n > l.MaxElements {
		return Delta{}, fmt.Errorf("scope: %d elements (limit %d)", n, l.MaxElements)
	}
	seen := map[string]bool{}
	check := func(id string) error {
		if id == "" || len(id) > l.MaxIDBytes || !utf8.ValidString(id) {
			return fmt.Errorf("scope: element id %q: 1 to %d bytes of UTF-8", id, l.MaxIDBytes)
		}
		if seen[id] {
			return fmt.Errorf("scope: element %q named twice", id)
		}
		seen[id] = true
		return nil
	}
	for _, m := range []map[string]Fields{d.Added, d.Modified} {
		for id, f := range m {
			if err := check(id); err != nil {
				return Delta{}, err
			}
			if len(f) > l.MaxFields {
				return Delta{}, fmt.Errorf("scope: element %q has %d fields (limit %d)", id, len(f), l.MaxFields)
			}
			for k, v := range f {
				if len(v) == 0 || !json.Valid(v) || !utf8.ValidString(k) {
					return Delta{}, fmt.Errorf("scope: element %q, field %q: not JSON", id, k)
				}
			}
		}
	}
	// An element removed and added again in one delta is allowed: the
	// removal goes first.
	for id := range d.Added {
		delete(seen, id)
	}
	for _, id := range d.Removed {
		if err := check(id); err != nil {
			return Delta{}, err
		}
	}
	return d, nil
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
