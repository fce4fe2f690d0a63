package snapshot

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/solipsism/mesh/scope"
)

// fieldsBits returns how many bits writeFields takes for obj.
func fieldsBits(obj []byte, idx map[string]int) int {
	var w Writer
	writeFields(&w, obj, idx)
	return w.Bits()
}

// roundTripFields writes a held element's fields with a name table
// learned from them, reads and resolves them as a client does.
func roundTripFields(t *testing.T, held []byte) (got []byte, bits int) {
	t.Helper()
	var f scope.Fields
	json.Unmarshal(held, &f) //nolint:errcheck
	var b gbuf
	b.learn(f)
	var w Writer
	writeFields(&w, held, b.nameIdx)
	if w.Bits() != fieldsBits(held, b.nameIdx) {
		t.Errorf("fieldsBits %d, written %d", fieldsBits(held, b.nameIdx), w.Bits())
	}
	refs, err := readFields(NewReader(w.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err = resolveFields(refs, b.names)
	if err != nil {
		t.Fatal(err)
	}
	return got, w.Bits()
}

func TestFieldsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		json string // as a world holds it: any JSON object of fields
		bits int    // 0: not checked
	}{
		{"a block", `{"c":17}`, 18},
		{"empty", `{}`, 2},
		{"every kind", `{"a":-2147483648,"b":2147483647,"c":"stone","d":true,"e":false,"f":null,"g":1.5,"h":[1,{"x":"y"}],"i":2147483648}`, 0},
		{"strings that are not plain", `{"html":"<b>&</b>","esc":"a\"b\\c\n","u":"é\u2028","bad":"\ud800"}`, 0},
		{"numbers kept as text", `{"a":-0,"b":1e3,"c":10.0,"d":0}`, 0},
		{"names needing escapes", `{"\"":1,"<":2,"ñ":3,"":4}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f scope.Fields
			if err := json.Unmarshal([]byte(tt.json), &f); err != nil {
				t.Fatal(err)
			}
			held := encodeFields(f) // what a ghost's buffer holds
			got, bits := roundTripFields(t, held)
			if tt.bits != 0 && bits != tt.bits {
				t.Errorf("%d bits, want %d", bits, tt.bits)
			}
			if string(got) != string(held) {
				t.Fatalf("read %s; want %s", got, held)
			}
		})
	}
}

func TestFieldsBadInput(t *testing.T) {
	write := func(fn func(w *Writer)) []byte {
		var w Writer
		fn(&w)
		return w.Bytes()
	}
	table := []string{"a", "b"}
	tests := []struct {
		name string
		pkt  []byte
	}{
		{"names out of order", write(twoTrue(1, 0))},
		{"a name twice", write(twoTrue(0, 0))},
		{"a name past the table", write(twoTrue(0, 2))},
		{"an unknown kind", write(func(w *Writer) {
			w.WritePacked(1)
			w.WritePacked(0)
			w.WriteBits(7, kindBits)
		})},
		{"JSON that is not", write(func(w *Writer) {
			w.WritePacked(1)
			w.WritePacked(0)
			w.WriteBits(kindJSON, kindBits)
			w.WriteBytes([]byte("{"))
		})},
		{"a string that is not UTF-8", write(func(w *Writer) {
			w.WritePacked(1)
			w.WritePacked(0)
			w.WriteBits(kindString, kindBits)
			w.WriteBytes([]byte{0xff})
		})},
		{"more fields than bits", write(func(w *Writer) { w.WritePacked(1000) })},
		{"cut short", write(func(w *Writer) {
			w.WritePacked(1)
			w.WritePacked(0)
			w.WriteBits(kindString, kindBits)
			w.WriteBytes([]byte("abc"))
		})[:2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refs, err := readFields(NewReader(tt.pkt))
			if err == nil {
				var got []byte
				got, err = resolveFields(refs, table)
				if err == nil {
					t.Fatalf("got %s", got)
				}
			}
			if !errors.Is(err, ErrBadPacket) {
				t.Fatalf("got %v, want ErrBadPacket", err)
			}
		})
	}
}

// twoTrue writes two fields of value true, named by numbers a and b.
func twoTrue(a, b uint32) func(w *Writer) {
	return func(w *Writer) {
		w.WritePacked(2)
		for _, name := range []uint32{a, b} {
			w.WritePacked(name)
			w.WriteBits(kindTrue, kindBits)
		}
	}
}

func FuzzFields(f *testing.F) {
	var w Writer
	writeFields(&w, []byte(`{"a":1,"b":"x","c":[1],"d":null}`), map[string]int{"a": 0, "b": 1, "c": 2, "d": 3})
	f.Add(w.Bytes())
	f.Add([]byte{0})
	table := []string{"a", "b", "c", "d", "é", "<"}
	f.Fuzz(func(t *testing.T, b []byte) {
		refs, err := readFields(NewReader(b))
		if err != nil {
			return
		}
		got, err := resolveFields(refs, table)
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("read invalid JSON %q", got)
		}
		if back, _ := roundTripFields(t, got); string(back) != string(got) {
			t.Fatalf("%s re-read as %s", got, back)
		}
	})
}
