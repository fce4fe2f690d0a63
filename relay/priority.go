package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// Priority and budgets (Options.Priority; docs/protocol.md, "Priority and
// budgets"): which client it applies to, its budget and the bands of its
// region; what waits is each link's priority.Plan.

// PriorityOptions configures priority and budgets. The zero value turns
// both off.
type PriorityOptions struct {
	// Near is the distance from the centre of a client's region within
	// which objects are sent every tick; each doubling of the distance
	// beyond halves the rate, down to one tick in 2^(Bands-1). Zero means
	// no priority by distance.
	Near float64
	// Bands is the number of bands. Zero means 4 (every 1, 2, 4 and 8
	// ticks: 400 ms at the default tick).
	Bands int
	// MaxBytesPerSecond caps what one client is sent of updates; a client
	// may ask for less in its metadata ("budget"). Zero means no cap but
	// the client's.
	MaxBytesPerSecond int
}

// budgetLocked returns ls's budget in bytes per second, 0 for none: what
// its peer asked, capped by the node's cap, which does not apply to a
// peer that relays others (a proxy, a page's worker: "role":"proxy"),
// whose clients' budgets hold at their own links. n.mu must be held.
func (n *Node) budgetLocked(ls *linkState) int {
	md, _ := ls.link.Metadata()
	b := n.opts.Priority.MaxBytesPerSecond
	if md.Role == ownership.Proxy.String() {
		b = 0
	}
	if md.Budget > 0 && (b == 0 || md.Budget < b) {
		b = md.Budget
	}
	return b
}

// bandOf returns the band of position p for region boxes (interest.Band
// by the node's priority options).
func (n *Node) bandOf(p [3]float64, boxes []peer.Box) int {
	return interest.Band(p, boxes, n.opts.Priority.Near, n.opts.Priority.Bands)
}

// prioritised reports whether priority or a budget applies to ls now.
// n.mu must be held.
func (n *Node) prioritised(ls *linkState) bool {
	return ls.link != nil && ls.kind == ownership.Downstream && ls.region != nil && ls.region.HasBoxes &&
		(n.opts.Priority.Near > 0 || n.budgetLocked(ls) > 0)
}

// planLocked decides, for a link under priority, which of this flush's
// entries (sub, with their verdicts) wait (package priority), and returns
// the owed updates to send first. n.mu must be held.
func (n *Node) planLocked(ls *linkState, sub []int, verdict func(j int) peer.Verdict) []*priority.Owed {
	if ls.prio == nil {
		ls.prio = priority.New()
	}
	f := &n.fan
	entries := ls.prio.Entries(len(sub))
	for j, i := range sub {
		e := &f.log[i]
		entries[j] = priority.Entry{Rec: e.rec, Verdict: verdict(j), Placed: e.spot.HasP}
	}
	band := func(j int) int { return n.bandOf(f.log[sub[j]].spot.P, ls.region.Boxes) }
	return ls.prio.Decide(entries, f.unique, band, priority.Budget{BytesPerSecond: float64(n.budgetLocked(ls)), Tick: n.opts.Tick, Now: time.Now()})
}

// owingLocked reports whether a link waits for owed updates: the flush
// then runs with nothing new, to send them when due. n.mu must be held.
func (n *Node) owingLocked() bool {
	for _, ls := range n.sp.Regioned() {
		if ls.prio != nil && ls.prio.Owing() > 0 {
			return true
		}
	}
	return false
}

// sendOwedLocked sends ls what it is owed: of the objects of owner, or of
// every object if owner is "". n.mu must be held.
func (n *Node) sendOwedLocked(ls *linkState, owner string) {
	if ls.prio == nil || ls.prio.Owing() == 0 {
		return
	}
	n.offerOwedLocked(ls, ls.prio.Take(owner))
}

// offerOwedLocked offers ls owed updates, each with its verdict, whole
// (as the world holds the object now) where the peer lacks it. n.mu must
// be held.
func (n *Node) offerOwedLocked(ls *linkState, out []*priority.Owed) {
	if len(out) == 0 || ls.link == nil {
		return
	}
	recs := make([]*peer.Record, len(out))
	for i, o := range out {
		recs[i] = o.Rec
	}
	ls.link.Offer(recs, func(i int) peer.Verdict { return out[i].Verdict }, func(i int) *peer.Record {
		o, ok := n.world.Get(recs[i].ID)
		if !ok || o.Slot != recs[i].Slot {
			return nil
		}
		full := n.newRecord(gameworld.Change{Type: gameworld.Add, ID: o.ID, Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties,
			Scopes: o.Scopes.Snapshots()}, o.Slot, recs[i].Born)
		full.ObjectScopes = o.Scopes
		return full
	}, true)
}
