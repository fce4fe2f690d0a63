package main

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/solipsism/mesh/internal/loop"
)

// reclaimer gives memory back to the operating system after a flood
// ends. Go returns freed heap only gradually, and an idle process may not
// collect for minutes, so a node that held a flood of objects or
// connections would keep its RSS long after they left. When the load
// (objects, scope elements and connections) has fallen to a quarter of its peak since the
// last release, and that peak was large enough to matter, it forces a
// collection that returns the freed memory at once (at the second check
// that sees the fall). So it does too once a flood that stays (a load
// grown by minPeak and by a quarter since the last release) has settled
// for two checks: what taking it in left behind (decoded messages, queues sent
// out, the log) is garbage, and would hold the RSS at a multiple of the
// world until the next collection, minutes later.
type reclaimer struct {
	// load reports the current load.
	load func() int
	// release returns memory; debug.FreeOSMemory unless set.
	release func()
	// minPeak is the smallest peak worth a release.
	minPeak int
	// peak is the highest load seen since the last release: checks
	// sample the load, and observe catches a flood that comes and goes
	// between two of them.
	peak atomic.Int64
	// due is set by the check that first sees the load fallen: the
	// release waits for the next one, so that what still held the
	// flood's memory for a moment (a tick's batch, a bridge's pending
	// changes) has let go.
	due bool
	// base is the load at the last release, last the previous check's;
	// grown is set by the check that first sees a settled growth.
	base, last int
	grown      bool
}

// observe notes a load seen between checks. It is safe for concurrent
// use.
func (r *reclaimer) observe(n int) {
	for {
		p := r.peak.Load()
		if int64(n) <= p || r.peak.CompareAndSwap(p, int64(n)) {
			return
		}
	}
}

// check samples the load and releases memory if it fell far enough. It is
// called from one goroutine at a time.
func (r *reclaimer) check() bool {
	n := r.load()
	r.observe(n)
	last := r.last
	r.last = n
	peak := int(r.peak.Load())
	if peak < r.minPeak || n > peak/4 {
		r.due = false
		// (Grown by a quarter at least: a world that keeps growing is
		// not collected at every step.)
		settled := n >= r.base+max(r.minPeak, r.base/4) && abs(n-last) <= n/100
		if !settled {
			r.grown = false
			return false
		}
		if !r.grown {
			r.grown = true
			return false
		}
	} else if !r.due {
		r.due = true
		return false
	}
	r.due, r.grown = false, false
	r.base = n
	if r.release != nil {
		r.release()
	} else {
		debug.FreeOSMemory()
	}
	r.peak.Store(int64(n))
	return true
}

// run checks every interval until ctx ends.
func (r *reclaimer) run(ctx context.Context, every time.Duration) {
	loop.Every(ctx, every, func() { r.check() })
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
