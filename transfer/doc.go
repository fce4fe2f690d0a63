// Package transfer keeps the bookkeeping of ownership transfers between
// nodes, without I/O: the requests a node passes toward the node that
// decides them, one per object in flight (Requests), and the answers a
// mesh server holds until the other members acknowledge its grant
// (Holds). Who may ask and who wins are package ownership's and
// gameworld's rules; what is sent is the relay's.
//
// Concurrency: neither type is safe for concurrent use; the node guards
// them with its lock.
package transfer
