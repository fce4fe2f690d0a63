package snapshot

import (
	"errors"
	"math/bits"
)

// Bit packing. Values are written least significant bit first into bytes
// filled from their lowest bit, as Unity's DataStream does. Packed
// integers use its 16-bucket code: a prefix code for the bucket (2 to 6
// bits) followed by the value's offset in the bucket (0 to 32 bits), so 0
// costs 2 bits and the largest uint32 38.

// bucketSizes and bucketOffsets define the 16 buckets: bucket i holds
// bucketOffsets[i] to bucketOffsets[i]+2^bucketSizes[i]-1.
var (
	bucketSizes   = [16]uint8{0, 0, 1, 2, 3, 4, 6, 8, 10, 12, 15, 18, 21, 24, 27, 32}
	bucketOffsets = [16]uint32{0, 1, 2, 4, 8, 16, 32, 96, 352, 1376, 5472, 38240, 300384, 2397536, 19174752, 153392480}
	// codeLengths are the prefix code's lengths per bucket.
	codeLengths = [16]uint8{2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 6, 6}
	// codes are the canonical prefix codes built from codeLengths.
	codes = canonicalCodes()
)

func canonicalCodes() (c [16]uint32) {
	code, prev := uint32(0), codeLengths[0]
	for i, l := range codeLengths {
		if i > 0 {
			code = (code + 1) << (l - prev)
		}
		c[i], prev = code, l
	}
	return c
}

// packedBits returns the bits WritePacked takes for v.
func packedBits(v uint32) int {
	b := bucketOf(v)
	return int(codeLengths[b]) + int(bucketSizes[b])
}

// bucketOf returns the bucket of v.
func bucketOf(v uint32) int {
	b := 15
	for b > 0 && v < bucketOffsets[b] {
		b--
	}
	return b
}

// PackedBits returns how many bits WritePacked uses for v.
func PackedBits(v uint32) int {
	b := bucketOf(v)
	return int(codeLengths[b]) + int(bucketSizes[b])
}

// zigzag maps signed to unsigned so that small magnitudes stay small.
func zigzag(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }

func unzigzag(u uint32) int32 { return int32(u>>1) ^ -int32(u&1) }

// Writer packs bits into a byte slice. The zero value is ready to use.
type Writer struct {
	buf   []byte
	nbits int
	count bool // only count the bits (a layout measured before it is written)
}

// Reset empties the writer, keeping its buffer.
func (w *Writer) Reset() { w.buf, w.nbits = w.buf[:0], 0 }

// Bits returns how many bits have been written.
func (w *Writer) Bits() int { return w.nbits }

// Bytes returns the written bytes; the last one is padded with zeros.
func (w *Writer) Bytes() []byte { return w.buf }

// WriteBits writes the n (≤ 32) low bits of v.
func (w *Writer) WriteBits(v uint32, n int) {
	if w.count {
		w.nbits += n
		return
	}
	for n > 0 {
		if w.nbits%8 == 0 {
			w.buf = append(w.buf, 0)
		}
		free := 8 - w.nbits%8
		k := min(free, n)
		w.buf[len(w.buf)-1] |= byte(v&(1<<k-1)) << (w.nbits % 8)
		v >>= k
		n -= k
		w.nbits += k
	}
}

// WriteBool writes one bit.
func (w *Writer) WriteBool(b bool) {
	if b {
		w.WriteBits(1, 1)
	} else {
		w.WriteBits(0, 1)
	}
}

// WritePacked writes v with the bucket code.
func (w *Writer) WritePacked(v uint32) {
	b := bucketOf(v)
	// The prefix code goes most significant bit first, so that a reader
	// can decode it a bit at a time.
	c, l := codes[b], int(codeLengths[b])
	w.WriteBits(reverse(c, l), l)
	w.WriteBits(v-bucketOffsets[b], int(bucketSizes[b]))
}

// WritePackedInt writes a signed value zigzagged.
func (w *Writer) WritePackedInt(v int32) { w.WritePacked(zigzag(v)) }

// WriteCompact writes v with the compact code of a compact group's
// ghosts, for values that are mostly zero: one 0 bit for 0, else a 1 bit
// and v-1 packed (a zero costs 1 bit instead of 2, a small value as much
// as packed).
func (w *Writer) WriteCompact(v uint32) {
	if v == 0 {
		w.WriteBits(0, 1)
		return
	}
	w.WriteBits(1, 1)
	w.WritePacked(v - 1)
}

// WriteCompactInt writes a signed value zigzagged, with the compact code.
func (w *Writer) WriteCompactInt(v int32) { w.WriteCompact(zigzag(v)) }

// WriteBytes writes a length (packed) and the bytes.
func (w *Writer) WriteBytes(p []byte) {
	w.WritePacked(uint32(len(p)))
	for _, c := range p {
		w.WriteBits(uint32(c), 8)
	}
}

// writeString writes a length (packed) and the string's bytes.
func (w *Writer) writeString(s string) {
	w.WritePacked(uint32(len(s)))
	if w.count {
		w.nbits += 8 * len(s)
		return
	}
	for i := 0; i < len(s); i++ {
		w.WriteBits(uint32(s[i]), 8)
	}
}

// truncate forgets every bit from n on.
func (w *Writer) truncate(n int) {
	w.nbits = n
	w.buf = w.buf[:(n+7)/8]
	if n%8 != 0 {
		w.buf[len(w.buf)-1] &= 1<<(n%8) - 1
	}
}

// Append appends another writer's bits.
func (w *Writer) Append(o *Writer) { w.AppendRange(o, 0, o.nbits) }

// AppendRange appends bits from to to of another writer.
func (w *Writer) AppendRange(o *Writer, from, to int) {
	if w.count {
		w.nbits += to - from
		return
	}
	if from%8 == 0 && w.nbits%8 == 0 {
		// Both aligned: whole bytes copy as they are.
		n := (to - from) / 8
		w.buf = append(w.buf, o.buf[from/8:from/8+n]...)
		w.nbits += n * 8
		from += n * 8
	}
	for from < to {
		k := min(32, to-from)
		w.WriteBits(o.bitsAt(from, k), k)
		from += k
	}
}

// bitsAt returns n (≤ 32) bits at offset off.
func (w *Writer) bitsAt(off, n int) uint32 {
	var v uint32
	for got := 0; got < n; {
		o := (off + got) % 8
		k := min(8-o, n-got)
		v |= uint32(w.buf[(off+got)/8]>>o&(1<<k-1)) << got
		got += k
	}
	return v
}

func reverse(c uint32, n int) uint32 { return bits.Reverse32(c) >> (32 - n) }

// ErrShort is returned when a packet ends before what it announces.
var ErrShort = errors.New("snapshot: packet too short")

// Reader unpacks bits written by a Writer. After any read fails, Err is
// set and every later read returns zero.
type Reader struct {
	buf []byte
	pos int
	err error
}

// NewReader reads p.
func NewReader(p []byte) *Reader { return &Reader{buf: p} }

// Err returns the first error met.
func (r *Reader) Err() error { return r.err }

// Remaining returns how many bits are left.
func (r *Reader) Remaining() int { return len(r.buf)*8 - r.pos }

// ReadBits reads n (≤ 32) bits.
func (r *Reader) ReadBits(n int) uint32 {
	if r.err != nil {
		return 0
	}
	if n > r.Remaining() {
		r.err = ErrShort
		return 0
	}
	var v uint32
	for got := 0; got < n; {
		off := r.pos % 8
		k := min(8-off, n-got)
		v |= uint32(r.buf[r.pos/8]>>off&(1<<k-1)) << got
		got += k
		r.pos += k
	}
	return v
}

// ReadBool reads one bit.
func (r *Reader) ReadBool() bool { return r.ReadBits(1) == 1 }

// ReadPacked reads a value written by WritePacked.
func (r *Reader) ReadPacked() uint32 {
	var c uint32
	for l := 1; l <= 6; l++ {
		c = c<<1 | r.ReadBits(1)
		if r.err != nil {
			return 0
		}
		for b := range codes {
			if int(codeLengths[b]) == l && codes[b] == c {
				return bucketOffsets[b] + r.ReadBits(int(bucketSizes[b]))
			}
		}
	}
	r.err = errors.New("snapshot: invalid packed integer")
	return 0
}

// ReadPackedInt reads a value written by WritePackedInt.
func (r *Reader) ReadPackedInt() int32 { return unzigzag(r.ReadPacked()) }

// ReadCompact reads a value written by WriteCompact.
func (r *Reader) ReadCompact() uint32 {
	if r.ReadBits(1) == 0 {
		return 0
	}
	return r.ReadPacked() + 1
}

// ReadCompactInt reads a value written by WriteCompactInt.
func (r *Reader) ReadCompactInt() int32 { return unzigzag(r.ReadCompact()) }

// ReadBytes reads bytes written by WriteBytes, at most max of them.
func (r *Reader) ReadBytes(max int) []byte {
	n := r.ReadPacked()
	if r.err != nil {
		return nil
	}
	if int64(n) > int64(max) || int64(n)*8 > int64(r.Remaining()) {
		r.err = ErrShort
		return nil
	}
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.ReadBits(8))
	}
	return p
}
