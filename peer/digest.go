package peer

import (
	"encoding/json"
	mathbits "math/bits"
	"slices"
	"strconv"
)

// Anti-entropy messages, our extension, exchanged only with peers that
// list FeatureDigest. Each side of a link periodically sends the other a
// digest of what it has sent it and believes it holds: the objects, put in
// buckets by the hash of their id, each bucket the XOR of the objects'
// digests (gameworld.ObjectDigest). The receiver compares it with the same
// digest of what it holds from that side and asks for the buckets that
// differ (requestRepair); the sender answers with repairing, every object
// of those buckets the receiver should hold (as adds, in worldChange
// messages), and repaired, after which the receiver drops what it holds
// from that side in those buckets and was not sent. Messages on a link
// arrive in order, so a digest describes exactly what was sent before it.

// Anti-entropy message types.
const (
	TypeDigest        = "digest"
	TypeRequestRepair = "requestRepair"
	TypeRepairing     = "repairing"
	TypeRepaired      = "repaired"
)

// MaxDigestBuckets bounds the buckets of a digest.
const MaxDigestBuckets = 4096

// Digest is the data of a digest message: Buckets[i] is the XOR of the
// digests of the objects whose IDHash % len(Buckets) is i; Count is how
// many objects there are.
type Digest struct {
	Count   int
	Buckets []uint64
}

// Repair is the data of requestRepair, repairing and repaired: a set of
// buckets (ascending indices) of a digest of Of buckets.
type Repair struct {
	Of      int
	Buckets []int
}

// Has reports whether r covers the bucket of an object with that id hash.
func (r Repair) Has(idHash uint64) bool {
	_, ok := slices.BinarySearch(r.Buckets, int(idHash%uint64(r.Of)))
	return ok
}

// DigestHandler is implemented by a Handler that takes part in
// anti-entropy; its methods are called like the others, one at a time in
// message order.
type DigestHandler interface {
	HandleDigest(l *Link, d Digest)
	HandleRepair(l *Link, typ string, r Repair)
}

type wireDigest struct {
	Count   int      `json:"count"`
	Buckets []string `json:"buckets"`
}

type wireRepair struct {
	Of      int   `json:"of"`
	Buckets []int `json:"buckets"`
}

// DecodeDigest decodes the data of a digest message.
func DecodeDigest(data json.RawMessage) (Digest, error) {
	var w wireDigest
	if err := json.Unmarshal(data, &w); err != nil {
		return Digest{}, invalid("digest: %v", err)
	}
	if len(w.Buckets) == 0 || len(w.Buckets) > MaxDigestBuckets || w.Count < 0 {
		return Digest{}, invalid("digest: want 1 to %d buckets and a count", MaxDigestBuckets)
	}
	d := Digest{Count: w.Count, Buckets: make([]uint64, len(w.Buckets))}
	for i, b := range w.Buckets {
		v, err := strconv.ParseUint(b, 16, 64)
		if err != nil || len(b) != 16 {
			return Digest{}, invalid("digest: bucket %d is not 16 hex digits", i)
		}
		d.Buckets[i] = v
	}
	return d, nil
}

// AppendDigest appends a complete digest message.
func AppendDigest(dst []byte, d Digest) []byte {
	dst = append(dst, `["digest",{"count":`...)
	dst = strconv.AppendInt(dst, int64(d.Count), 10)
	dst = append(dst, `,"buckets":[`...)
	for i, b := range d.Buckets {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		s := strconv.FormatUint(b, 16)
		for range 16 - len(s) {
			dst = append(dst, '0')
		}
		dst = append(dst, s...)
		dst = append(dst, '"')
	}
	return append(dst, "]}]"...)
}

// DecodeRepair decodes the data of requestRepair, repairing or repaired.
func DecodeRepair(data json.RawMessage) (Repair, error) {
	var w wireRepair
	if err := json.Unmarshal(data, &w); err != nil {
		return Repair{}, invalid("repair: %v", err)
	}
	if w.Of < 1 || w.Of > MaxDigestBuckets || len(w.Buckets) > w.Of {
		return Repair{}, invalid("repair: want of from 1 to %d and at most that many buckets", MaxDigestBuckets)
	}
	for i, b := range w.Buckets {
		if b < 0 || b >= w.Of || i > 0 && b <= w.Buckets[i-1] {
			return Repair{}, invalid("repair: buckets must be ascending indices below of")
		}
	}
	return Repair{Of: w.Of, Buckets: w.Buckets}, nil
}

// AppendRepair appends a complete requestRepair, repairing or repaired
// message.
func AppendRepair(dst []byte, typ string, r Repair) []byte {
	dst = append(dst, `["`...)
	dst = append(dst, typ...)
	dst = append(dst, `",{"of":`...)
	dst = strconv.AppendInt(dst, int64(r.Of), 10)
	dst = append(dst, `,"buckets":[`...)
	for i, b := range r.Buckets {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(b), 10)
	}
	return append(dst, "]}]"...)
}

// SendDigest sends the peer d, after every record offered so far.
func (l *Link) SendDigest(d Digest) { l.controlMessage(AppendDigest(nil, d)) }

// SendRepair sends the peer a requestRepair, repairing or repaired
// message, after every record offered so far.
func (l *Link) SendRepair(typ string, r Repair) { l.controlMessage(AppendRepair(nil, typ, r)) }

// controlMessage queues an encoded message as a barrier in the outbox.
func (l *Link) controlMessage(msg []byte) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.closed {
		return
	}
	it := l.barrierLocked()
	if it == nil {
		return
	}
	it.appOnly = false
	it.msgs = append(it.msgs, msg)
	l.startWriterLocked()
}

// KnownSet returns what the link believes its peer holds, as a test of
// slots, copied now.
func (l *Link) KnownSet() func(slot uint32) bool {
	l.outMu.Lock()
	known := slices.Clone(l.known)
	l.outMu.Unlock()
	return known.has
}

// KnowsAny reports whether the link believes its peer holds any object
// (counting what is queued for it).
func (l *Link) KnowsAny() bool {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	for _, w := range l.known {
		if w != 0 {
			return true
		}
	}
	return false
}

// KnownSlots appends to dst the slots of what the link believes its peer
// holds (as KnownSet tests them), in increasing order, and returns it.
func (l *Link) KnownSlots(dst []uint32) []uint32 {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	for w, bits := range l.known {
		for bits != 0 {
			b := mathbits.TrailingZeros64(bits)
			dst = append(dst, uint32(w<<6|b))
			bits &= bits - 1
		}
	}
	return dst
}
