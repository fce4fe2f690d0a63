package relay

import (
	"runtime"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Departures: links that close, worlds that leave a chain, mesh members
// that die, and the grace during which a dropped peer's objects wait for
// it. Everything here runs with n.mu held (or takes it).

// releaseClaims removes every object owned by one of the worlds ids, routes
// the removals, then drops the worlds' claims. The removals come first, while
// the claims still make them local, so that they also go upstream and to mesh
// peers. from, if not nil, is a link whose peer removed them itself. n.mu
// must be held; it is let go between slices of a large departure (see
// releaseClaimsTo).
func (n *Node) releaseClaims(ids []string, from *linkState) {
	n.releaseClaimsTo(ids, from, n.id)
}

// departSlice is how many objects of departed worlds a node takes out of
// its world, and offers its links, before it lets others have its lock. A
// newcomer's handshake takes the lock several times, each after a slice:
// at 2,048 a pair joining a proxy chain during a departure of 99,000
// objects waited 190 ms, at 512 90 ms. A departure bigger than a slice is
// told to our downstream nodes by a departed message.
const departSlice = 512

// departure is a world whose objects are being removed: the claim it had,
// where persistent objects go, and the link whose peer removed them
// itself (or nil).
type departure struct {
	claim *linkState
	heir  string
	from  *linkState
	// told are the downstream links sent a departed message for it
	// (shared by the worlds that left together): they are not sent the
	// removes.
	told map[*linkState]bool
}

// departedMark is where in the shared log a big departure began: links
// that take departed messages are sent one there (fanout.markLocked).
type departedMark struct {
	at     int
	worlds []string
	heir   string
	from   *linkState
	told   map[*linkState]bool
}

// departingLocked returns world id's departure, or nil. n.mu must be
// held.
func (n *Node) departingLocked(id string) *departure {
	if len(n.deps.departing) == 0 {
		return nil
	}
	return n.deps.departing[id]
}

// takesDeparted reports whether ls's peer is told big departures by a
// departed message rather than sent their removes: a downstream node of
// ours (peer.FeatureDeparted). n.mu must be held.
func (n *Node) takesDeparted(ls *linkState) bool {
	if ls.kind != ownership.Downstream || ls.link == nil {
		return false
	}
	md, ok := ls.link.Metadata()
	return ok && md.Has(peer.FeatureDeparted)
}

// releaseClaimsTo is releaseClaims with the heir of persistent objects:
// this node, or the peer node that held the departed worlds (it gives them
// the same claim, so both agree). Persistent objects fall to the heir;
// the others are removed.
//
// A world that leaves with 99,000 objects would hold the node's lock for
// most of a second: a departure is taken a slice at a time, each offered
// to the links at once, and between slices the node lets others in (a
// new peer's first object, other peers' changes), which thus overtake the
// removal by at most a slice. The first slice goes before this returns,
// the rest on a goroutine of its own, so that the caller (a link's reader,
// when the departure is told by metadata) goes on. Meanwhile the worlds'
// claims stay where they were, so the removals still go to peers that
// need them (a 2016 upstream); our own upstreams and mesh members learn of
// the departure from the chain we announce them (departsOnMetadata).
// Whoever claims a departing world meanwhile (its peer, reconnected) first
// has what is left of it removed at once (settleDepartureLocked), as if
// the departure had been done in one piece. n.mu must be held.
func (n *Node) releaseClaimsTo(ids []string, from *linkState, heir string) {
	if len(ids) == 0 {
		return
	}
	mine := make(map[string]*departure, len(ids))
	chained := false
	told := map[*linkState]bool{}
	objects := 0
	for _, id := range ids {
		chained = chained || n.chainedLocked(id)
		d := &departure{claim: n.hub.claims[id], heir: heir, from: from, told: told}
		n.deps.departing[id], mine[id] = d, d
		objects += n.quota.ledger.Owned(id)
	}
	if objects > departSlice {
		// Too many to remove in one piece: our nodes downstream are told
		// the departure here and remove the objects themselves, instead
		// of being sent every remove behind this node's slices.
		// Told at once, not at the next tick: a peer joining there
		// meanwhile would be sent the departing objects.
		n.fan.departedAt = append(n.fan.departedAt, departedMark{at: len(n.fan.log), worlds: ids, heir: heir, from: from, told: told})
		n.kickLocked()
	}
	if chained {
		// Our nodes upstream and in the mesh learn of the departure from
		// the chain we announce them, at its start, and remove the
		// objects themselves: they are not sent the removes
		// (departsOnMetadata).
		n.chainChanged()
	}
	removed, more := n.departSliceLocked(n.departingOf(ids, mine, nil), from, heir, departSlice)
	if more && !n.life.closed {
		// The rest goes on its own goroutine: a departure told by
		// metadata must not hold up the link's reader (the member's or
		// proxy's other changes come that way).
		n.life.wg.Add(1)
		go func() {
			defer n.life.wg.Done()
			n.lock()
			defer n.mu.Unlock()
			n.departLocked(ids, mine, from, heir, removed)
		}()
		return
	}
	n.endDeparturesLocked(ids, mine, removed)
}

// departLocked removes what is left of a departure, a slice at a time,
// letting the lock go before each, then ends it. n.mu must be held.
func (n *Node) departLocked(ids []string, mine map[string]*departure, from *linkState, heir string, removed int) {
	var owners []string
	for !n.life.closed {
		n.yieldLocked()
		owners = n.departingOf(ids, mine, owners[:0])
		k, more := n.departSliceLocked(owners, from, heir, departSlice)
		removed += k
		if !more {
			break
		}
	}
	n.endDeparturesLocked(ids, mine, removed)
}

// departingOf appends to dst the worlds of ids whose departure is still
// the one in mine (not settled by a new claim meanwhile). n.mu must be
// held.
func (n *Node) departingOf(ids []string, mine map[string]*departure, dst []string) []string {
	for _, id := range ids {
		if n.deps.departing[id] == mine[id] {
			dst = append(dst, id)
		}
	}
	return dst
}

// endDeparturesLocked ends the departures in mine that are still under
// way. n.mu must be held.
func (n *Node) endDeparturesLocked(ids []string, mine map[string]*departure, removed int) {
	for _, id := range ids {
		if d := mine[id]; n.deps.departing[id] == d {
			n.endDepartureLocked(id, d)
		}
	}
	if removed > 0 {
		n.log.Debug("removed objects of departed worlds", "worlds", len(ids), "objects", removed, "first", firstOf(ids))
	}
}

// departSliceLocked removes at most max objects of the worlds owners
// (every one if max is not positive), giving persistent ones to heir, and
// routes the changes. It returns how many objects it removed and whether
// some may be left. n.mu must be held.
func (n *Node) departSliceLocked(owners []string, from *linkState, heir string, max int) (removed int, more bool) {
	batch := n.world.IDsOf(nil, owners, max)
	if len(batch) == 0 {
		return 0, false
	}
	// Persistent objects outlive their owner (everyone is told); the
	// others go (their peer, if from, removed them itself).
	var changes, kept []gameworld.Change
	for _, id := range batch {
		if o, ok := n.world.Get(id); ok && flagsOf(o.Properties).Persistent {
			kept = append(kept, gameworld.Change{Type: gameworld.Transfer, ID: id, Owner: heir})
		} else {
			changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: id})
		}
	}
	if len(kept) > 0 {
		n.route(n.world.Apply(kept, nil).Records, nil)
	}
	res := n.world.Apply(changes, nil)
	n.route(res.Records, from)
	return len(res.Records), max > 0 && len(batch) == max
}

// endDepartureLocked ends world id's departure d: its claim goes, unless
// someone else holds it now. n.mu must be held.
func (n *Node) endDepartureLocked(id string, d *departure) {
	delete(n.deps.departing, id)
	if n.hub.claims[id] == d.claim {
		delete(n.hub.claims, id)
	}
}

// settleDepartureLocked finishes at once the departure of world id, if
// one is under way: what claims the world next starts from nothing, as
// it would had the departure been done in one piece. n.mu must be held.
func (n *Node) settleDepartureLocked(id string) {
	d := n.deps.departing[id]
	if d == nil {
		return
	}
	n.departSliceLocked([]string{id}, d.from, d.heir, 0)
	n.endDepartureLocked(id, d)
}

// handleDeparted is the node's side of peer.DepartedHandler (wire.go):
// the upstream tells that
// worlds left it, and is not sending their removes; this node removes
// their objects itself, as it would have had it been sent every remove
// (its own downstream peers are sent the removes, or told the same way).
// Worlds behind this node are not the upstream's to depart, and a
// departed message from any other peer is ignored.
func (n *Node) handleDeparted(l *peer.Link, d peer.Departed) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed || !ls.ready {
		return
	}
	if ls.kind != ownership.Upstream {
		l.Stats().Refused.Add(uint64(len(d.Worlds)))
		n.log.Debug("ignoring departed from a peer that is not our upstream", "link", l.ID(), "worlds", len(d.Worlds))
		return
	}
	var ids []string
	for _, id := range d.Worlds {
		if id == n.id || n.hub.claims[id] != nil || n.deps.departing[id] != nil {
			continue // behind us, or leaving already
		}
		ids = append(ids, id)
	}
	n.releaseClaimsTo(ids, ls, d.Heir)
}

// settleReturnsLocked finishes at once the departure told by upstream ls
// of every world that changes adds, updates or transfers to: the upstream
// sends those of a departed world again only once it came back, and what
// it sends then must not be taken out by the rest of the departure. n.mu
// must be held.
func (n *Node) settleReturnsLocked(ls *linkState, changes []gameworld.Change) {
	for i := range changes {
		if changes[i].Type == gameworld.Remove {
			continue // brings nothing back (a region's edge, say)
		}
		if d := n.deps.departing[changes[i].Owner]; d != nil && d.from == ls {
			n.settleDepartureLocked(changes[i].Owner)
		}
	}
}

// yieldLocked offers the links what changed so far and lets the node's
// lock go for a moment: goroutines waiting for it get it first (Go's mutex
// hands itself to waiters that waited more than a millisecond). n.mu must
// be held; it is held again on return.
func (n *Node) yieldLocked() {
	n.flushLocked()
	n.mu.Unlock()
	if n.deps.yieldHook != nil {
		n.deps.yieldHook()
	}
	runtime.Gosched()
	n.lock()
}

// removeWhere removes every object for which remove is true and routes the
// removals; it returns how many it removed. from, if not nil, is a link
// whose peer removed them itself. n.mu must be held.
func (n *Node) removeWhere(remove func(gameworld.Object) bool, from *linkState) int {
	var changes []gameworld.Change
	n.world.Range(func(o gameworld.Object) bool {
		if remove(o) {
			changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: o.ID})
		}
		return true
	})
	if len(changes) == 0 {
		return 0
	}
	res := n.world.Apply(changes, nil)
	n.route(res.Records, from)
	return len(res.Records)
}

// departures are the worlds whose objects are being removed a slice at a
// time (departures.go).
type departures struct {
	departing map[string]*departure
	// yieldHook, if set (by tests), runs whenever a long task lets the
	// lock go (yieldLocked).
	yieldHook func()
}
