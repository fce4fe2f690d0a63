package peer

import "time"

// Pacing a burst. A link whose queue fell behind sends it a slice at a
// time, each followed by a ping whose answer says the peer has read it
// (awaitPeer): what changes meanwhile coalesces into the queue, and a live
// change of another peer goes with the next slice rather than behind the
// whole burst. It still waits for the slice before it, so the slice's size
// is the latency a burst adds to everyone else's changes on that link. A
// fixed size is wrong both ways: 2,048 records take a busy node 100 ms or
// more to take in, while a peer across an ocean needs big slices to fill
// its round trip. So a link sizes its slices by what the last one cost the
// peer: the time from writing it to the ping's answer, less the link's
// round trip (the least such time seen: a ping before the link's first
// burst, keepalive pings, quick slices), aiming
// at sliceTarget of the peer's work per slice. A peer that takes slices in
// quickly gets maxSlice; the round trip itself never shrinks them.

const (
	// minSlice and maxSlice bound a slice, in queued objects. The floor
	// keeps a burst's throughput: each slice also costs a ping's answer,
	// and on a starved machine the scheduling of both ends, which this
	// estimate counts as the peer's work; slices of 128 then crawled (a
	// proxy's 17,000-object catch-up after reconnects took over 30 s).
	minSlice = 512
	maxSlice = 2048
	// sliceTarget is how long a slice should take the peer to read and
	// apply: about half a default tick, so that a live change behind a
	// burst waits about a tick at each hop.
	sliceTarget = 25 * time.Millisecond
)

// pacing is a link's slice size and round-trip estimate. Guarded by the
// link's outMu.
type pacing struct {
	slice int           // entries of the next slice; 0 means maxSlice
	rtt   time.Duration // least answer time seen lately; 0 if none yet
}

// size returns how many entries the next slice takes.
func (p *pacing) size() int {
	if p.slice == 0 {
		return maxSlice
	}
	return p.slice
}

// observeRTT notes a keepalive ping's answer time. The estimate is the
// least seen, creeping up by 1/8 a sample so that a route that got slower
// is learnt.
func (p *pacing) observeRTT(d time.Duration) {
	if p.rtt == 0 || d < p.rtt {
		p.rtt = d
		return
	}
	p.rtt += (d - p.rtt) / 8
}

// sliceTook notes that a slice of n entries took d from its write to the
// ping's answer, and sizes the next one.
func (p *pacing) sliceTook(n int, d time.Duration) {
	if p.rtt == 0 || d < p.rtt {
		p.rtt = d // (a slice's answer only ever lowers the estimate)
	}
	if n <= 0 {
		return
	}
	work := d - p.rtt
	next := maxSlice
	if work > 0 {
		next = int(int64(n) * int64(sliceTarget) / int64(work))
	}
	// Halfway to the new estimate: one slow slice (a pause of the peer's
	// collector, say) does not shrink the next ones to nothing.
	next = (p.size() + next + 1) / 2
	p.slice = min(max(next, minSlice), maxSlice)
}
