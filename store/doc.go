// Package store keeps what a node must not lose across restarts and
// crashes: its world identifier, the secret its resume tokens are signed
// with, its durable objects (persistent ones, and those it owns) with
// their owners and epochs, and a few named values of its bridges.
//
// A Store is written in batches, one transaction each: the node collects a
// tick's changes and hands them to a Writer, which writes them on a
// goroutine of its own, so that a slow or full disk never holds up
// relaying. Bolt (go.etcd.io/bbolt) is the store on disk: one file,
// pure Go, crash-safe by copy-on-write pages and one fsync per
// transaction. Memory is the store of a node without a data directory,
// and of tests.
//
// The backup format (Export, Import) is JSON, documented in
// docs/operations.md; its decoder is fuzzed.
package store
