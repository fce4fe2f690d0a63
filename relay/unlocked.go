package relay

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Offers outside the lock. A tick's flush leaves out the links that need
// nothing of it but its records (no marks, refresh, reveal, answers,
// priority or new region due, and no departure in the log), moves the log aside for them,
// and lets n.mu go: while they are offered it on every core, incoming
// changes apply to the world and fill the next log. What those offers
// read stays still without the lock: the batch's entries are theirs,
// and a link's region, chain and claims change only under n.lock, which
// waits for the batch first (settleLocked), as does every flush; the
// incoming changes that run alongside touch none of it.

// batch is a flush's log, offered outside n.mu to the links picked for
// it.
type batch struct {
	log    []logEntry
	recs   []*peer.Record
	unique bool
	// picked marks the links offered the batch, by their place in
	// n.hub.order at the flush; links lists them.
	picked []bool
	links  []*linkState
	// done is closed once every picked link has been offered the batch.
	done chan struct{}
}

// lock takes n.mu once the last flush's offers outside it are done:
// whatever its holder then sends a link follows them.
func (n *Node) lock() {
	n.mu.Lock()
	n.settleLocked()
}

// settleLocked waits until the links picked for the last batch have been
// offered it, and keeps the batch's memory for the next log. n.mu must be
// held.
func (n *Node) settleLocked() {
	f := &n.fan
	b := f.pending
	if b == nil {
		return
	}
	<-b.done
	f.pending = nil
	clear(b.log)
	clear(b.recs)
	if cap(b.log) <= 4096 || len(b.log) >= cap(b.log)/4 { // (after a burst, let the memory go)
		f.spare, f.spareRecs = b.log[:0], b.recs[:0]
	}
}

// pickUnlocked returns the batch of this flush's links to be offered its
// log outside n.mu, or nil if none is. n.mu must be held.
func (n *Node) pickUnlocked() *batch {
	f := &n.fan
	if len(f.log) == 0 || f.deps || n.opts.Tick == peer.Immediate || runtime.GOMAXPROCS(0) < 2 {
		// (On one core, changes applied meanwhile would only slow this
		// tick's delivery: they wait for the next one anyway.)
		return nil
	}
	var b *batch
	now := time.Now()
	for k, ls := range n.hub.order {
		if !ls.ready || ls.link == nil || ls.att != nil || ls.prio != nil || n.prioritised(ls) || n.marksFor(ls) ||
			ls.refreshWanted || ls.refreshing || ls.revealing || len(ls.answers) > 0 ||
			(ls.wanted != nil && !now.Before(ls.regionNext)) || // its new region applies at the flush's end
			(ls.kind == ownership.Upstream && len(f.requests) > 0) {
			continue
		}
		if b == nil {
			b = &batch{picked: make([]bool, len(n.hub.order))}
		}
		b.picked[k] = true
		b.links = append(b.links, ls)
	}
	return b
}

// offerBatch offers b's log to its links, on every core, and marks it
// done. It runs without n.mu.
func (n *Node) offerBatch(b *batch) {
	defer close(b.done)
	full := fullOf(b.log)
	var next atomic.Int64
	work := func() {
		for {
			j := int(next.Add(1)) - 1
			if j >= len(b.links) {
				return
			}
			n.offerFrom(b, b.links[j], full)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(b.links))
	if len(b.log)*len(b.links) < parallelMin {
		workers = 1
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// offerFrom offers ls what it gets of b: the whole log, or for a link
// with a region the entries its cells hold (listed by the flush).
func (n *Node) offerFrom(b *batch, ls *linkState, full func(int) *peer.Record) {
	if ls.region == nil {
		ls.link.Offer(b.recs, func(i int) peer.Verdict { return n.verdictOf(ls, &b.log[i]) }, full, b.unique)
		return
	}
	sub := ls.region.sub
	recs := make([]*peer.Record, len(sub))
	for j, i := range sub {
		recs[j] = b.recs[i]
	}
	ls.link.Offer(recs, func(j int) peer.Verdict {
		e := &b.log[sub[j]]
		return n.regionVerdictOf(ls, e, n.verdictOf(ls, e))
	}, func(j int) *peer.Record { return full(sub[j]) }, b.unique)
}
