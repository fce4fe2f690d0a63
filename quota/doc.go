// Package quota bounds what peers may do to a node, so that a hostile or
// careless one cannot take it down: Limits (the operator's bounds), a
// Ledger of objects per owner checked against them, the bounds of a whole
// world for links no per-owner quota covers, and connections per address
// (PerIP). It does no I/O; the relay refuses, counts and logs.
//
// Every refusal is an *Error naming its limit (as solipsism_limited_total
// labels it) and wrapping ErrQuota.
//
// Concurrency: a Ledger is not safe for concurrent use (the relay calls it
// under its lock); a PerIP is.
package quota
