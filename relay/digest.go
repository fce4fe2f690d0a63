package relay

import (
	"time"

	"github.com/solipsism/mesh/antientropy"
	"github.com/solipsism/mesh/internal/loop"
	"github.com/solipsism/mesh/metrics"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"golang.org/x/time/rate"
)

// Anti-entropy (see peer/digest.go for the messages). Every link whose peer
// speaks it compares, each DigestInterval, what this side has sent the
// peer with what the peer holds from it, and repairs only the buckets that
// differ. A healthy link never repairs: a repair is a divergence found, and
// counted (Repairs, solipsism_repairs_total) and logged at WARN the first
// time of each kind.

// DefaultDigestInterval is the default Options.DigestInterval.
const DefaultDigestInterval = 30 * time.Second

// Repair kinds: an object the peer lacked, one whose copy differed, and one
// it held that it should not have.
const (
	RepairMissing = metrics.RepairMissing
	RepairStale   = metrics.RepairStale
	RepairExtra   = metrics.RepairExtra
)

// Repairs returns how many objects anti-entropy has repaired here, by kind
// (RepairMissing, RepairStale, RepairExtra).
func (n *Node) Repairs() map[string]uint64 { return n.dig.repairs.Map() }

// burstQueued is how many queued objects make a link's digest wait: a
// link that far behind is sending a burst in slices.
const burstQueued = 2048

// transfersInFlight reports whether ownership changes are being decided
// (requests waiting for an upstream, answers held for mesh members): the
// two sides of a link may then see an object on either side of it. n.mu
// must be held.
func (n *Node) transfersInFlight(ls *linkState) bool {
	return n.xfer.asked.Len() > 0 || n.xfer.held.Len() > 0 || len(ls.answers) > 0
}

// speaksDigest reports whether ls's peer takes part in anti-entropy.
func speaksDigest(ls *linkState) bool {
	if ls.link == nil || !ls.ready {
		return false
	}
	md, ok := ls.link.Metadata()
	return ok && md.Has(peer.FeatureDigest)
}

// sentOver reports whether an object of this owner is one this node sends
// ls's peer (rather than one the peer sent it). n.mu must be held.
func (n *Node) sentOver(ls *linkState, owner string) bool {
	rel := n.relation(ls, owner)
	if !ownership.MaySend(n.role, ls.kind, rel) {
		// (The peer may have been sent it under an owner it has since
		// left for a third world, which now sends it.)
		return false
	}
	if ls.kind == ownership.Upstream {
		return rel.Local
	}
	return !rel.InLinkChain
}

// digestLoop sends due digests until the node closes.
func (n *Node) digestLoop() {
	defer n.life.wg.Done()
	every := time.Second
	if n.opts.DigestInterval > 0 {
		every = min(every, n.opts.DigestInterval/4)
	}
	loop.Every(n.life.ctx, every, func() {
		n.lock()
		defer n.mu.Unlock()
		if !n.life.closed {
			now := time.Now()
			if n.opts.DigestInterval > 0 {
				n.sendDigestsLocked(now)
			}
			n.answerDeferredLocked(now)
		}
	})
}

// sendDigestsLocked sends every link whose digest is due the digest of
// what this node has sent it. The log is flushed first, so that what the
// world holds is what the links were offered. n.mu must be held.
func (n *Node) sendDigestsLocked(now time.Time) {
	due := false
	for _, ls := range n.hub.order {
		if speaksDigest(ls) && ls.digest.Due(now) {
			due = true
			break
		}
	}
	if !due {
		return
	}
	n.flushLocked()
	defer n.life.metrics.DigestSince(time.Now())
	for _, ls := range n.hub.order {
		if !speaksDigest(ls) || !ls.digest.Due(now) {
			continue
		}
		n.sendOwedLocked(ls, "") // the digest is of what the world holds
		if ls.digest.Spread(now, n.opts.DigestInterval) {
			continue
		}
		if n.transfersInFlight(ls) {
			continue // at the next check, once decided
		}
		if len(n.deps.departing) > 0 {
			// A departure is going out a slice at a time: the peer's view
			// lags by what is in flight, as behind a burst.
			ls.digest.Postpone(now)
			continue
		}
		if ls.link.Queued() > burstQueued || ls.refreshing {
			// The link is working through a burst (or a refresh answer
			// goes out a slice at a time): a digest, which goes after it,
			// would hold up the live changes that overtake it.
			ls.digest.Postpone(now)
			continue
		}
		// What the link knows, not the whole world: a link that sees a
		// part of a big world costs what it sees.
		slots := ls.link.KnownSlots(nil)
		if !n.dig.budget.AllowN(now, max(1, len(slots))) {
			// Over the budget: this link's turn comes a little later.
			ls.digest.Postpone(now)
			continue
		}
		ls.digest.Sent(now, n.opts.DigestInterval)
		sent := n.ownerFilter(ls, n.sentOver)
		d := peer.Digest{Buckets: make([]uint64, antientropy.Buckets(len(slots)))}
		b := uint64(len(d.Buckets))
		n.world.RangeDigestsAt(slots, func(slot uint32, owner string, idHash, digest uint64) bool {
			if sent(owner) {
				d.Buckets[idHash%b] ^= digest
				d.Count++
			}
			return true
		})
		ls.link.SendDigest(d)
	}
}

// ownerFilter returns test(ls, owner), remembered per owner for one pass
// over the world: owners are far fewer than objects. n.mu must be held.
func (n *Node) ownerFilter(ls *linkState, test func(*linkState, string) bool) func(owner string) bool {
	seen := map[string]bool{}
	var last string
	var lastV, any bool
	return func(owner string) bool {
		if any && owner == last {
			return lastV // neighbouring slots often share an owner
		}
		v, ok := seen[owner]
		if !ok {
			v = test(ls, owner)
			seen[owner] = v
		}
		last, lastV, any = owner, v, true
		return v
	}
}

// digestVisitsPerSecond bounds the objects anti-entropy visits per second,
// sending and checking digests together: at 20 to 40 ns a visit
// (BenchmarkDigest), 1 to 2% of one core. Past it,
// digests wait (and the interval stretches) rather than take the relay's
// CPU.
const digestVisitsPerSecond = 500_000

// heldFrom reports whether an object of this owner came to this node over
// ls (the peer sent it). n.mu must be held.
func (n *Node) heldFrom(ls *linkState, owner string) bool {
	rel := n.relation(ls, owner)
	if ls.kind == ownership.Upstream {
		return !rel.Local
	}
	return rel.InLinkChain
}

// handleDigest is the node's side of peer.DigestHandler (wire.go): the
// peer's digest of what it
// sent us is compared with what we hold from it, and the buckets that
// differ are asked for.
func (n *Node) handleDigest(l *peer.Link, d peer.Digest) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed || !ls.ready || ls.sweep != nil || ls.digest.Repairing(time.Now()) || n.transfersInFlight(ls) || len(n.deps.departing) > 0 {
		return // a reconnect's sweep, a repair, a transfer or a departure is under way
	}
	if !ls.digest.Take(time.Now()) {
		return
	}
	// What we hold from a downstream peer or a mesh member is what the
	// worlds it claims own: visited through the world's index by owner, it
	// costs what the peer sent, not the whole world. From an upstream it
	// is nearly everything: one pass.
	rangeHeld, visits := n.world.RangeDigests, n.world.Len()
	if ls.kind != ownership.Upstream {
		var owners []string
		for id, c := range n.hub.claims {
			if c == ls {
				owners = append(owners, id)
			}
		}
		visits = n.world.CountOf(owners) + len(owners)
		rangeHeld = func(fn func(uint32, string, uint64, uint64) bool) { n.world.RangeDigestsOf(owners, fn) }
	}
	if !n.dig.budget.AllowN(time.Now(), max(1, visits)) {
		return // over the budget: the next digest will tell
	}
	mine := make([]uint64, len(d.Buckets))
	count := 0
	held := n.ownerFilter(ls, n.heldFrom)
	b := uint64(len(mine))
	rangeHeld(func(_ uint32, owner string, idHash, digest uint64) bool {
		if held(owner) {
			mine[idHash%b] ^= digest
			count++
		}
		return true
	})
	differ := ls.digest.Compare(mine, d.Buckets)
	if len(differ) == 0 {
		return
	}
	r, ok := ls.digest.Ask(time.Now(), n.opts.DigestInterval, len(mine), differ)
	if !ok {
		return
	}
	n.log.Debug("digest differs; asking for a repair", "link", l.ID(), "buckets", len(differ), "of", len(mine), "peer count", d.Count, "held", count)
	l.SendRepair(peer.TypeRequestRepair, r)
}

// digests is what anti-entropy counted and may spend (digest.go).
type digests struct {
	repairs antientropy.Counts
	budget  *rate.Limiter
}
