package relay

import (
	"context"
	"sync"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// Fan-out. Changes applied to the world are appended to one shared log;
// once per tick (at once with a tick of peer.Immediate) the node offers the
// log to every ready link, each record with its verdict for that link. A
// link that keeps up takes the records as they are and writes them from
// encodings shared by all links; only a link that falls behind coalesces
// them into a queue of its own. So the work per record and link is one
// ownership check and one pointer, and what one link costs does not
// depend on what the others do.

// logEntry is one record of the shared log, with what routing needs.
type logEntry struct {
	rec *peer.Record
	// after is the object's state after rec, for peers that lack it.
	after gameworld.Properties
	full  *peer.Record
	// from is the link whose peer made the change, or nil.
	from *linkState
	// oi is taken when the change takes effect: a departing peer's
	// removals must still count as local when they are routed, although
	// its claims are gone by the next tick.
	oi ownerInfo
	// spot is the object's position after the change, if it has one,
	// and its room (set only while some link has a region).
	spot interest.Spot
}

// fanout is the shared log. Guarded by Node.mu.
type fanout struct {
	log  []logEntry
	recs []*peer.Record // log[i].rec, as Offer takes them
	// every lists the log's positions, for the wide regions (indexLog).
	every []int
	// bySlot indexes the log's entries by slot, to coalesce a moving
	// object's updates within a tick.
	bySlot map[uint32]int
	// unique is false when an object has more than one entry (say, removed
	// and added again, in its slot or another), so links must coalesce
	// through their queues, which keep a remove and an add of one id out
	// of one message.
	unique bool
	// removed lists the ids the log removes, while it removes any.
	removed map[string]bool
	// refreshes is set when some link waits for a refresh answer, or for
	// the next slice of one; moreRefresh, during a flush, when some link
	// does for the next.
	refreshes, moreRefresh bool
	// answers is set when some link has transfer answers due, or
	// requests are to go upstream.
	answers bool
	// requests are transfer requests for the upstream (answers.go).
	requests []gameworld.Change
	// mdAt lists positions in the log where the worlds behind this node
	// changed: upstream and mesh links are sent this node's metadata there,
	// so that a departed world's removals go before the metadata that drops
	// it, and a new world's objects after the metadata that announces it.
	mdAt []int
	// departedAt lists positions in the log where big departures began:
	// downstream links that take departed messages are sent one there,
	// and not the removes that follow (departures.go).
	departedAt []departedMark
	// msgAt lists the ephemeral messages posted since the last flush, at
	// their positions in the log (messages.go).
	msgAt []msgMark
	// deps is set when the log holds a change of a departing world, whose
	// verdicts read the departure's state.
	deps bool
	// pending is the last flush's log while links are offered it outside
	// n.mu (unlocked.go); spare is a log's memory for reuse.
	pending   *batch
	spare     []logEntry
	spareRecs []*peer.Record
	// kick asks the tick loop for a flush now (a refresh answer's next
	// slice).
	kick chan struct{}
	// subs receive the messages that reach this node (messages.go).
	subs msgSubs
	// sched folds far updates for links under priority without a budget,
	// and dues are what it publishes in this flush; shells find which
	// links take each, and unplaced lists those (without a position) that
	// every link takes (priority.go).
	sched    *priority.Schedule[interest.Spot]
	dues     []due
	shells   interest.Shells
	unplaced []int
	// near is what of this flush's log is near whom, for the links on
	// the schedule (nearby.go).
	near nearby
	// whole holds, by slot, the whole records made this flush (wholeOf),
	// for the peers it answers with whole objects to share.
	whole map[uint32]wholeEntry
}

// chainChanged tells upstream and mesh links, at this point of the log,
// that the set of worlds behind this node changed. n.mu must be held.
func (n *Node) chainChanged() {
	n.fan.mdAt = append(n.fan.mdAt, len(n.fan.log))
	if n.opts.Tick == peer.Immediate {
		n.flushLocked()
	}
}

// kickLocked asks the tick loop for a flush now, not at the next tick
// (more of a sliced answer is due, or a departure must be told). n.mu must
// be held.
func (n *Node) kickLocked() {
	select {
	case n.fan.kick <- struct{}{}:
	default:
	}
}

// tickLoop flushes the shared log once per tick until the node closes.
func (n *Node) tickLoop() {
	defer n.life.wg.Done()
	t := time.NewTicker(n.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-n.life.ctx.Done():
			return
		case <-t.C:
		case <-n.fan.kick:
		}
		n.lock()
		b := n.flushWith(true)
		n.mu.Unlock()
		if b != nil {
			n.offerBatch(b)
		}
	}
}

// flushLocked offers the shared log to every ready link, answers pending
// refreshes, and empties the log. n.mu must be held.
func (n *Node) flushLocked() { n.flushWith(false) }

// flushWith is flushLocked; with unlocked, the links that need nothing
// else of this flush are left out and returned with the log as a batch,
// to be offered it once n.mu is let go (offerBatch). n.mu must be held.
func (n *Node) flushWith(unlocked bool) *batch {
	n.settleLocked()
	f := &n.fan
	if len(f.log) == 0 && !f.refreshes && len(f.mdAt) == 0 && len(f.departedAt) == 0 && len(f.msgAt) == 0 && !f.answers && !n.sp.due && !n.owingLocked() {
		return nil
	}
	start := time.Now()
	full := fullOf(f.log)
	var mdUp, mdUpAll, mdMesh peer.Metadata
	if len(f.mdAt) > 0 {
		mdUp, mdMesh = n.localMetadataLocked(ownership.Upstream), n.localMetadataLocked(ownership.Mesh)
		mdUpAll = mdUp
		if len(n.deps.departing) > 0 {
			mdUpAll = n.chainMetadataLocked(ownership.Upstream, true)
		}
	}
	n.indexLog()
	n.scheduleLocked()
	var b *batch
	if unlocked {
		b = n.pickUnlocked()
	}
	offered := n.offerParallel(full, b)
	for k, ls := range n.hub.order {
		if b != nil && b.picked[k] {
			continue
		}
		announces := len(f.mdAt) > 0 && (ls.kind == ownership.Upstream || ls.kind == ownership.Mesh)
		md := mdUp
		switch {
		case ls.kind == ownership.Mesh:
			md = mdMesh
		case announces && !n.departsOnMetadata(ls):
			md = mdUpAll // it is sent every remove, in chain
		}
		if (ls.prio != nil && !n.prioritised(ls)) || (ls.sched && !n.scheduled(ls)) {
			n.sendOwedLocked(ls, "") // priority no longer applies to it, or now with a budget
			ls.prio, ls.sched = nil, false
		}
		if !ls.ready {
			if announces {
				ls.link.SendMetadata(md)
			}
			continue
		}
		switch {
		case offered != nil && offered[k]:
		case ls.region != nil:
			n.offerSubset(ls, ls.region.sub, announces, md, full)
		default:
			from := 0
			offer := func(to int) {
				if to == from {
					return
				}
				base := from
				ls.link.Offer(f.recs[from:to], func(i int) peer.Verdict { return n.verdict(ls, base+i) },
					func(i int) *peer.Record { return full(base + i) }, f.unique)
				from = to
			}
			n.markLocked(ls, announces, md, offer)
			offer(len(f.log))
		}
		switch {
		case ls.refreshWanted:
			ls.refreshWanted = false
			n.sendRefreshLocked(ls)
		case ls.refreshing:
			n.continueRefreshLocked(ls)
		}
		if ls.revealing {
			n.continueRevealLocked(ls)
		}
		n.sendAnswersLocked(ls)
		if ls.kind == ownership.Upstream && len(f.requests) > 0 {
			n.sendRequestsLocked(ls)
		}
	}
	for _, a := range n.hub.atts {
		if a.ls.region != nil {
			n.offerSubset(a.ls, a.ls.region.sub, false, peer.Metadata{}, full)
		} else {
			a.offer(f.recs, func(i int) peer.Verdict { return n.verdict(a.ls, i) }, full)
		}
		if a.ls.refreshWanted {
			a.ls.refreshWanted = false
			n.sendRefreshLocked(a.ls)
		}
		n.sendAnswersLocked(a.ls)
	}
	if f.sched != nil {
		f.sched.End()
		clear(f.dues)
		f.dues, f.unplaced = f.dues[:0], f.unplaced[:0]
		f.shells.Reset()
	}
	f.near.built = false
	used := len(f.log)
	if b != nil {
		// The links left out are offered this log once n.mu is let go;
		// the next changes go to a log of their own.
		b.log, b.recs, b.unique, b.done = f.log, f.recs, f.unique, make(chan struct{})
		f.pending = b
		f.log, f.recs, f.spare, f.spareRecs = f.spare, f.spareRecs, nil, nil
	}
	clear(f.log)
	clear(f.recs)
	clear(f.bySlot)
	f.deps = false
	f.removed = nil
	f.log, f.recs, f.refreshes, f.mdAt, f.answers = f.log[:0], f.recs[:0], f.moreRefresh, f.mdAt[:0], false
	clear(f.departedAt)
	f.departedAt = f.departedAt[:0]
	clear(f.msgAt)
	f.msgAt = f.msgAt[:0]
	f.moreRefresh = false
	if cap(f.log) > 4096 && used < cap(f.log)/4 { // after a burst, let the memory go (a steady big log keeps it)
		f.log, f.recs, f.bySlot = nil, nil, nil
	}
	if n.life.persist != nil {
		n.life.persist.flushLocked(n)
	}
	if n.sp.due {
		n.applyDueRegionsLocked(b)
	}
	if len(f.whole) > 4096 {
		f.whole = nil // (after a join storm in a big world, let the memory go)
	} else {
		clear(f.whole)
	}
	n.life.metrics.Tick(time.Since(start))
	return b
}

// fullOf returns what gives a peer that lacks the object of log's i-th
// entry all of it: the add, or the object's state after the change,
// built once (called from several goroutines).
func fullOf(log []logEntry) func(i int) *peer.Record {
	var mu sync.Mutex
	return func(i int) *peer.Record {
		e := &log[i]
		if e.rec.Type == gameworld.Add {
			return e.rec
		}
		mu.Lock()
		defer mu.Unlock()
		if e.full == nil && !e.after.IsZero() {
			r := peer.NewRecord(gameworld.Change{Type: gameworld.Add, ID: e.rec.ID, Owner: e.rec.Owner, Epoch: e.rec.Epoch, Properties: e.after,
				Scopes: e.rec.ObjectScopes.Snapshots()}, e.rec.Slot)
			r.Born, r.ObjectScopes = e.rec.Born, e.rec.ObjectScopes
			e.full = r
		}
		return e.full
	}
}

// markLocked sends ls what the log's marks hold for it, each where it is
// in the log: this node's metadata (if announces), departed messages (to
// downstream links that take them) and ephemeral messages. upTo(i) offers
// the link the log's records before position i not yet offered. n.mu must
// be held.
func (n *Node) markLocked(ls *linkState, announces bool, md peer.Metadata, upTo func(int)) {
	f := &n.fan
	departs := len(f.departedAt) > 0 && n.takesDeparted(ls)
	msgs := len(f.msgAt) > 0 && takesMessages(ls)
	if !announces && !departs && !msgs {
		return
	}
	const none = int(^uint(0) >> 1)
	i, j, k := 0, 0, 0
	for {
		atMD, atDep, atMsg := none, none, none
		if announces && i < len(f.mdAt) {
			atMD = f.mdAt[i]
		}
		if departs && j < len(f.departedAt) {
			atDep = f.departedAt[j].at
		}
		if msgs && k < len(f.msgAt) {
			atMsg = f.msgAt[k].at
		}
		switch {
		case atMD != none && atMD <= atDep && atMD <= atMsg:
			upTo(atMD)
			ls.link.Announce(md)
			i++
		case atDep != none && atDep <= atMsg:
			dm := f.departedAt[j]
			j++
			if dm.from == ls {
				continue // its peer told us
			}
			upTo(dm.at)
			for _, w := range dm.worlds {
				n.sendOwedLocked(ls, w)
			}
			ls.link.SendDeparted(peer.Departed{Worlds: dm.worlds, Heir: dm.heir})
			dm.told[ls] = true
		case atMsg != none:
			upTo(atMsg)
			n.sendOwedLocked(ls, f.msgAt[k].m.From) // the sender's changes before its message
			n.sendMessageLocked(ls, &f.msgAt[k])
			k++
		default:
			return
		}
	}
}

// verdict says what ls gets of the log's i-th record. n.mu must be held.
func (n *Node) verdict(ls *linkState, i int) peer.Verdict { return n.verdictOf(ls, &n.fan.log[i]) }

// verdictOf says what ls gets of log entry e. n.mu must be held, or, for
// a batch's entries, the batch has no departures (see pickUnlocked).
func (n *Node) verdictOf(ls *linkState, e *logEntry) peer.Verdict {
	switch {
	case e.from == ls:
		return peer.Echo
	case e.oi.dep != nil && e.rec.Type == gameworld.Remove && n.departsOnMetadata(ls) && !n.chainedLocked(e.rec.Owner):
		// The peer removes the departed world's objects itself when our
		// metadata, announced in this flush or an earlier one, drops it.
		return peer.Forget
	case e.oi.dep != nil && e.oi.dep.told[ls]:
		// The peer was sent a departed message for the world, before
		// this record: it removes the objects itself, and would take
		// any other record of the world for its return.
		if e.rec.Type == gameworld.Remove {
			return peer.Forget
		}
		return peer.Skip
	case ownership.MaySend(n.role, ls.kind, e.oi.relation(ls)):
		return peer.Send
	}
	return peer.Skip
}

// departsOnMetadata reports whether ls's peer removes the objects of a
// world that leaves the identifierChain we announce it by itself, as every
// node of ours does (HandleMetadata): a mesh member, or an upstream that
// speaks ownership. Such a peer is not sent the removes of a departure
// (peer.Forget); a 2016 upstream is, with the world kept in the chain
// until they are all out. n.mu must be held.
func (n *Node) departsOnMetadata(ls *linkState) bool {
	switch {
	case ls.kind == ownership.Mesh:
		return true
	case ls.kind == ownership.Upstream && ls.link != nil:
		md, ok := ls.link.Metadata()
		return ok && md.Has(peer.FeatureOwnership)
	}
	return false
}

// chainedLocked reports whether world id is in the identifierChain this
// node announces to its upstream and mesh peers: claimed here, and not
// departing. n.mu must be held.
func (n *Node) chainedLocked(id string) bool {
	c := n.hub.claims[id]
	return c != nil && c.kind == ownership.Downstream && (len(n.deps.departing) == 0 || n.deps.departing[id] == nil)
}

// Flush sends what the node has queued now, rather than at the next
// tick, and waits until every link has written it, or ctx is done: a
// program about to close sends its last changes first.
func (n *Node) Flush(ctx context.Context) {
	n.lock()
	if n.life.closed {
		n.mu.Unlock()
		return
	}
	n.flushLocked()
	links := make([]*peer.Link, 0, len(n.hub.order))
	for _, ls := range n.hub.order {
		if ls.link != nil {
			links = append(links, ls.link)
		}
	}
	n.mu.Unlock()
	for _, l := range links {
		for !l.Drained() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
}
