package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// An element's fields go on the wire not as their JSON text but as a
// packed count, then per field, in increasing byte order of names: the
// name's number in its scope's table of field names (packed; the table
// travels with the scope, see bufPiece), a kind (3 bits) and the value in
// the kind's form. The client rebuilds the exact JSON the server holds
// (Go's encoding: keys sorted, compact, HTML characters escaped), so a
// block such as {"c":17} costs 18 bits, not 71.
const (
	kindInt    = iota // packed zigzag, an integer of int32 whose JSON is its decimal form
	kindString        // packed length + the string's bytes, a string whose JSON re-encodes alike
	kindFalse
	kindTrue
	kindNull
	kindJSON // packed length + the value's JSON text: anything else
	kindBits = 3
)

// fieldKind classifies a compact JSON value, and returns the integer or
// string it holds for those kinds.
func fieldKind(v []byte) (kind int, n int32, s string) {
	switch string(v) {
	case "false":
		return kindFalse, 0, ""
	case "true":
		return kindTrue, 0, ""
	case "null":
		return kindNull, 0, ""
	}
	if len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		if i, err := strconv.ParseInt(string(v), 10, 32); err == nil && strconv.FormatInt(i, 10) == string(v) {
			return kindInt, int32(i), ""
		}
		return kindJSON, 0, ""
	}
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		if b, _ := json.Marshal(s); bytes.Equal(b, v) {
			return kindString, 0, s
		}
	}
	return kindJSON, 0, ""
}

// writeFields writes an element's fields, a JSON object as encodeFields
// makes them, its names numbered by idx.
func writeFields(w *Writer, obj []byte, idx map[string]int) {
	var m map[string]json.RawMessage
	json.Unmarshal(obj, &m) //nolint:errcheck // made by encodeFields
	names := slices.Sorted(maps.Keys(m))
	w.WritePacked(uint32(len(names)))
	for _, name := range names {
		v := m[name]
		w.WritePacked(uint32(idx[name]))
		kind, n, s := fieldKind(v)
		w.WriteBits(uint32(kind), kindBits)
		switch kind {
		case kindInt:
			w.WritePackedInt(n)
		case kindString:
			w.WriteBytes([]byte(s))
		case kindJSON:
			w.WriteBytes(v)
		}
	}
}

// fieldRef is a field as read, before its name is looked up: the name's
// number and the value's JSON.
type fieldRef struct {
	name  uint32
	value []byte
}

// maxFieldNames bounds a scope's table of field names.
const maxFieldNames = 4096

// readFields reads fields written by writeFields; resolve names them.
func readFields(r *Reader) ([]fieldRef, error) {
	n := r.ReadPacked()
	if r.Err() != nil || int64(n)*(2+kindBits) > int64(r.Remaining()) {
		return nil, fmt.Errorf("%w: an element's fields", ErrBadPacket)
	}
	refs := make([]fieldRef, 0, n)
	for range n {
		f := fieldRef{name: r.ReadPacked()}
		switch kind := r.ReadBits(kindBits); kind {
		case kindInt:
			f.value = strconv.AppendInt(nil, int64(r.ReadPackedInt()), 10)
		case kindString:
			s := r.ReadBytes(MaxJSONBytes)
			if !utf8.Valid(s) {
				return nil, fmt.Errorf("%w: a string field that is not UTF-8", ErrBadPacket)
			}
			f.value, _ = json.Marshal(string(s))
		case kindFalse:
			f.value = []byte("false")
		case kindTrue:
			f.value = []byte("true")
		case kindNull:
			f.value = []byte("null")
		case kindJSON:
			v := r.ReadBytes(MaxJSONBytes)
			if !json.Valid(v) {
				return nil, fmt.Errorf("%w: a field that is not JSON", ErrBadPacket)
			}
			var c bytes.Buffer
			json.Compact(&c, v) //nolint:errcheck // valid
			f.value = c.Bytes()
		default:
			return nil, fmt.Errorf("%w: field kind %d", ErrBadPacket, kind)
		}
		if r.Err() != nil {
			return nil, fmt.Errorf("%w: an element's fields", ErrBadPacket)
		}
		refs = append(refs, f)
	}
	return refs, nil
}

// resolveFields names read fields from their scope's table and returns
// them as the JSON object the server holds. Names must come in increasing
// byte order.
func resolveFields(refs []fieldRef, table []string) ([]byte, error) {
	out := []byte{'{'}
	prev := ""
	for i, f := range refs {
		if int64(f.name) >= int64(len(table)) {
			return nil, fmt.Errorf("%w: field name %d of %d", ErrBadPacket, f.name, len(table))
		}
		name := table[f.name]
		if i > 0 && name <= prev {
			return nil, fmt.Errorf("%w: an element's field names out of order", ErrBadPacket)
		}
		prev = name
		if i > 0 {
			out = append(out, ',')
		}
		q, _ := json.Marshal(name)
		out = append(append(append(out, q...), ':'), f.value...)
	}
	return append(out, '}'), nil
}
