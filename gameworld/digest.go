package gameworld

import (
	"encoding/binary"
	"hash/fnv"
)

// Hashes that let two copies of a world compare themselves cheaply (anti-
// entropy): every node and client computes them alike, so they are part of
// the wire protocol (docs/protocol.md, "Digests"). FNV-1a (64 bits) is in
// the standard library and fast on short inputs; the digests detect
// divergence, they do not authenticate anything.

// IDHash returns the FNV-1a hash of an object id; digests put objects in
// buckets by it.
func IDHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// PropertyHash returns the FNV-1a hash of a property's name, a zero byte
// and its value (JSON, as relayed).
func PropertyHash(name string, value []byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(value)
	return h.Sum64()
}

// ObjectDigest returns the digest of an object: the FNV-1a hash of its id's
// hash, its owner, a zero byte, its epoch and the sum of its properties'
// hashes (each 64-bit number big-endian).
func ObjectDigest(idHash uint64, owner string, epoch, props uint64) uint64 {
	var b [8]byte
	h := fnv.New64a()
	binary.BigEndian.PutUint64(b[:], idHash)
	h.Write(b[:])
	h.Write([]byte(owner))
	h.Write([]byte{0})
	binary.BigEndian.PutUint64(b[:], epoch)
	h.Write(b[:])
	binary.BigEndian.PutUint64(b[:], props)
	h.Write(b[:])
	return h.Sum64()
}
