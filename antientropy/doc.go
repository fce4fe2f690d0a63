// Package antientropy keeps one link's side of anti-entropy: when its next
// digest is due, which buckets of a peer's digest differ from ours two
// digests in a row, the repair asked for and what its answer has brought,
// the gaps (objects whose scope deltas came with one) to ask for, and repair
// requests that came too soon after the one before. The messages are
// package peer's (Digest, Repair); the passes over the world and the sends
// are the relay's.
//
// It is written here rather than taken from a library because what it
// decides is this protocol's: the libraries of the field (Merkle trees,
// Dynamo-style read repair) compare stores, not the two ends of a link whose
// changes are in flight while they compare.
//
// A Link is not safe for concurrent use: its owner serialises every call (the
// relay calls it with its node's lock held). Counts is safe for concurrent
// use.
package antientropy
