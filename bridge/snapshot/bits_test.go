package snapshot

import (
	"fmt"
	"math"
	"testing"
)

func TestPackedBits(t *testing.T) {
	for _, c := range []struct {
		v    uint32
		bits int
	}{
		{0, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 5}, {7, 5}, {8, 7}, {15, 7}, {16, 8}, {31, 8}, {32, 10}, {95, 10},
		{96, 13}, {351, 13}, {352, 15}, {1375, 15}, {1376, 17}, {5472, 21}, {38240, 24}, {300384, 27},
		{2397536, 30}, {19174752, 33}, {153392479, 33}, {153392480, 38}, {math.MaxUint32, 38},
	} {
		t.Run(fmt.Sprint(c.v), func(t *testing.T) {
			if got := PackedBits(c.v); got != c.bits {
				t.Errorf("PackedBits = %d, want %d", got, c.bits)
			}
			var w Writer
			w.WritePacked(c.v)
			if w.Bits() != c.bits {
				t.Errorf("wrote %d bits, want %d", w.Bits(), c.bits)
			}
			if got := NewReader(w.Bytes()).ReadPacked(); got != c.v {
				t.Errorf("read %d", got)
			}
		})
	}
}

func TestCompactBits(t *testing.T) {
	for _, c := range []struct {
		v    uint32
		bits int
	}{
		{0, 1}, {1, 3}, {2, 4}, {3, 5}, {4, 5}, {5, 6}, {8, 6}, {9, 8}, {17, 9}, {math.MaxUint32, 39},
	} {
		t.Run(fmt.Sprint(c.v), func(t *testing.T) {
			var w Writer
			w.WriteCompact(c.v)
			if w.Bits() != c.bits {
				t.Errorf("wrote %d bits, want %d", w.Bits(), c.bits)
			}
			w.WriteCompactInt(-3) // zigzagged 5: 1 and 4 packed, 6 bits
			if w.Bits() != c.bits+6 {
				t.Errorf("wrote %d bits with -3, want %d", w.Bits(), c.bits+6)
			}
			r := NewReader(w.Bytes())
			if got, i := r.ReadCompact(), r.ReadCompactInt(); got != c.v || i != -3 || r.Err() != nil {
				t.Errorf("read %d, %d (%v)", got, i, r.Err())
			}
		})
	}
}

func TestBitsRoundTrip(t *testing.T) {
	var w Writer
	ints := []int32{0, 1, -1, 63, -64, math.MaxInt32, math.MinInt32, 1000, -1000}
	w.WriteBits(5, 3)
	w.WriteBool(true)
	for _, v := range ints {
		w.WritePackedInt(v)
	}
	w.WriteBits(0xdeadbeef, 32)
	w.WriteBytes([]byte("héllo"))
	var o Writer
	o.WriteBits(1, 1)
	o.AppendRange(&w, 0, w.Bits())
	r := NewReader(o.Bytes())
	r.ReadBits(1)
	if r.ReadBits(3) != 5 || !r.ReadBool() {
		t.Fatal("raw bits")
	}
	for _, v := range ints {
		if got := r.ReadPackedInt(); got != v {
			t.Fatalf("packed int %d read as %d", v, got)
		}
	}
	if r.ReadBits(32) != 0xdeadbeef || string(r.ReadBytes(10)) != "héllo" || r.Err() != nil {
		t.Fatal("tail")
	}
	r.ReadBits(32)
	if r.Err() == nil {
		t.Fatal("reading past the end is not an error")
	}
}
