package snapshot

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/solipsism/mesh/scope"
)

func TestFieldsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		json string // as a world holds it: any JSON object of fields
		bits int    // 0: not checked
	}{
		{"a block", `{"c":17}`, 27},
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
			var w Writer
			writeFields(&w, held)
			if tt.bits != 0 && w.Bits() != tt.bits {
				t.Errorf("%d bits, want %d", w.Bits(), tt.bits)
			}
			if w.Bits() != fieldsBits(held) {
				t.Errorf("fieldsBits %d, written %d", fieldsBits(held), w.Bits())
			}
			got, err := readFields(NewReader(w.Bytes()))
			if err != nil || string(got) != string(held) {
				t.Fatalf("read %s, %v; want %s", got, err, held)
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
	tests := []struct {
		name string
		pkt  []byte
	}{
		{"names out of order", write(twoTrue("b", "a"))},
		{"a name twice", write(twoTrue("a", "a"))},
		{"an unknown kind", write(func(w *Writer) {
			w.WritePacked(1)
			w.WriteBytes([]byte("a"))
			w.WriteBits(7, kindBits)
		})},
		{"JSON that is not", write(func(w *Writer) {
			w.WritePacked(1)
			w.WriteBytes([]byte("a"))
			w.WriteBits(kindJSON, kindBits)
			w.WriteBytes([]byte("{"))
		})},
		{"more fields than bits", write(func(w *Writer) { w.WritePacked(1000) })},
		{"cut short", write(func(w *Writer) {
			w.WritePacked(1)
			w.WriteBytes([]byte("abc"))
		})[:2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := readFields(NewReader(tt.pkt)); !errors.Is(err, ErrBadPacket) {
				t.Fatalf("got %s, %v; want ErrBadPacket", got, err)
			}
		})
	}
}

// twoTrue writes two fields of value true, named a and b.
func twoTrue(a, b string) func(w *Writer) {
	return func(w *Writer) {
		w.WritePacked(2)
		for _, name := range []string{a, b} {
			w.WriteBytes([]byte(name))
			w.WriteBits(kindTrue, kindBits)
		}
	}
}

func FuzzFields(f *testing.F) {
	var w Writer
	writeFields(&w, []byte(`{"a":1,"b":"x","c":[1],"d":null}`))
	f.Add(w.Bytes())
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := readFields(NewReader(b))
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("read invalid JSON %q", got)
		}
		var again Writer
		writeFields(&again, got)
		if back, err := readFields(NewReader(again.Bytes())); err != nil || string(back) != string(got) {
			t.Fatalf("%s re-read as %s, %v", got, back, err)
		}
	})
}
