package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// An element's fields go on the wire not as their JSON text but as a
// packed count, then per field, names in byte order: the name (packed
// length + bytes), a kind (3 bits) and the value in the kind's form. The
// client rebuilds the exact JSON the server holds (Go's encoding: keys
// sorted, compact, HTML characters escaped), so a block such as
// {"c":17} costs 27 bits, not 71.
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
// makes them.
func writeFields(w *Writer, obj []byte) {
	var m map[string]json.RawMessage
	json.Unmarshal(obj, &m) //nolint:errcheck // made by encodeFields
	names := sortedKeys(m)
	w.WritePacked(uint32(len(names)))
	for _, name := range names {
		v := m[name]
		w.WriteBytes([]byte(name))
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

// fieldsBits returns how many bits writeFields takes for obj.
func fieldsBits(obj []byte) int {
	var w Writer
	writeFields(&w, obj)
	return w.Bits()
}

// readFields reads fields written by writeFields and returns them as the
// JSON object the server holds. Names must come in increasing byte order,
// names and strings be UTF-8.
func readFields(r *Reader) ([]byte, error) {
	n := r.ReadPacked()
	if r.Err() != nil || int64(n)*(2+kindBits) > int64(r.Remaining()) {
		return nil, fmt.Errorf("%w: an element's fields", ErrBadPacket)
	}
	out := []byte{'{'}
	prev := ""
	for i := range n {
		name := string(r.ReadBytes(MaxStringBytes))
		if r.Err() != nil || (i > 0 && name <= prev) || !utf8.ValidString(name) {
			return nil, fmt.Errorf("%w: an element's field names", ErrBadPacket)
		}
		prev = name
		if i > 0 {
			out = append(out, ',')
		}
		q, _ := json.Marshal(name)
		out = append(append(out, q...), ':')
		switch kind := r.ReadBits(kindBits); kind {
		case kindInt:
			out = strconv.AppendInt(out, int64(r.ReadPackedInt()), 10)
		case kindString:
			s := r.ReadBytes(MaxJSONBytes)
			if !utf8.Valid(s) {
				return nil, fmt.Errorf("%w: field %q is not UTF-8", ErrBadPacket, name)
			}
			q, _ := json.Marshal(string(s))
			out = append(out, q...)
		case kindFalse:
			out = append(out, "false"...)
		case kindTrue:
			out = append(out, "true"...)
		case kindNull:
			out = append(out, "null"...)
		case kindJSON:
			v := r.ReadBytes(MaxJSONBytes)
			if !json.Valid(v) {
				return nil, fmt.Errorf("%w: field %q is not JSON", ErrBadPacket, name)
			}
			var c bytes.Buffer
			json.Compact(&c, v) //nolint:errcheck // valid
			out = append(out, c.Bytes()...)
		default:
			return nil, fmt.Errorf("%w: field kind %d", ErrBadPacket, kind)
		}
		if r.Err() != nil {
			return nil, fmt.Errorf("%w: an element's fields", ErrBadPacket)
		}
	}
	return append(out, '}'), nil
}
