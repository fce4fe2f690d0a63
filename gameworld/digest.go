package gameworld

// Hashes that let two copies of a world compare themselves cheaply (anti-
// entropy): every node and client computes them alike, so they are part of
// the wire protocol (docs/protocol.md, "Anti-entropy"). FNV-1a (64 bits)
// is fast on short inputs; the digests detect divergence, they do not
// authenticate anything. It is written out here rather than taken from
// hash/fnv because the world computes it on every change, and hash/fnv's
// hasher is allocated per use.

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// fnvUint64 hashes v as 8 big-endian bytes.
func fnvUint64(h, v uint64) uint64 {
	for shift := 56; shift >= 0; shift -= 8 {
		h ^= (v >> shift) & 0xff
		h *= fnvPrime
	}
	return h
}

// IDHash returns the FNV-1a hash of an object id; digests put objects in
// buckets by it.
func IDHash(id string) uint64 { return fnvString(fnvOffset, id) }

// PropertyHash returns the FNV-1a hash of a property's name, a zero byte
// and its value (JSON, as relayed).
func PropertyHash(name string, value []byte) uint64 {
	h := fnvString(fnvOffset, name)
	h = fnvBytes(h, []byte{0})
	return fnvBytes(h, value)
}

// ObjectDigest returns the digest of an object: the FNV-1a hash of its id's
// hash, its owner, a zero byte, its epoch and the sum of its properties'
// hashes (each 64-bit number big-endian).
func ObjectDigest(idHash uint64, owner string, epoch, props uint64) uint64 {
	h := fnvUint64(fnvOffset, idHash)
	h = fnvString(h, owner)
	h = fnvBytes(h, []byte{0})
	h = fnvUint64(h, epoch)
	return fnvUint64(h, props)
}
