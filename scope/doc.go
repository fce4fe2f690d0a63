// Package scope is seed 003's delta system for keyed sub-collections: a
// Scope (a Grid) holds Elements (its Blocks), each with a few fields; a
// Replica is a peer's copy of one. It does no I/O. The world keeps an
// object's scopes as Scopes (gameworld), relaying the deltas a Scope's
// Apply returns, and queues fold them with Compose.
//
// The owner's side mutates a Scope (Set, Remove); Tick closes the tick's
// changes into a Delta that carries, per element, only the fields marked
// dirty since the last tick, and advances the scope's version (ver) by one.
// A peer that missed deltas asks for Since(its version): every element
// changed after it, whole, and the removals after it, a delta that is
// self-contained from that version on. A Snapshot is Since(0): the whole
// scope.
//
// A Replica applies deltas by the seed's rules: a delta whose ver is not
// newer than the replica's is rejected (so applying one twice changes
// nothing); one built on a version the replica does not hold (a gap: its
// base is newer) is refused with ErrGap, and the replica needs Since or a
// Snapshot; within a delta, removals go before additions and
// modifications. Each applied element change is reported as an Event, so
// a renderer updates only what changed.
//
// Elements are stored compactly: an element is its key and eight bytes (an
// index into the scope's palette of distinct encodings, each a compact
// JSON object, and a 32-bit version), so a block costs tens of bytes
// (BenchmarkMemory), not a world object's overhead; a scope changes at
// most 2³²-1 times. Written by hand: no
// library keeps versioned keyed sub-collections with per-field dirty masks.
package scope
