// Package enet implements the ENet 1.3 protocol (the reference C library's
// enet/protocol.h) over UDP: connections with session ids, reliable and
// unreliable sequenced delivery per channel, unsequenced packets,
// fragments (reliable and unreliable), acknowledgements with sent-time
// echo, retransmission with RTT estimation and timeouts, pings, and
// bandwidth-limit and throttle-configure commands. It is wire-compatible
// with the C library, without checksums or compression (which the C
// library leaves off by default).
//
// It is written here because no maintained pure-Go ENet exists: the Go
// bindings need cgo and the C library at build time, which would break a
// plain `go run` on a fresh machine. It knows nothing of what it carries.
//
// Timeouts follow the C library's rule: a peer is given up when nothing
// sent to it has been acknowledged since the first retransmission that
// is still unanswered, for 30 s, or for 5 s once one command has been
// sent six times; any acknowledgement starts the clock again.
//
// Memory is bounded per peer (Options.MaxWaitingData covers fragments,
// out-of-order packets and unread ones), and a half-open connection is
// answered only when its connect comes again, never on a timer, so a
// spoofed source cannot make a host send more than it received.
package enet
