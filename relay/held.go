package relay

import (
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
)

// Held answers: a mesh server holds a transfer's answer to its asker
// until the other members have acknowledged the grant.

// heldTimeout bounds how long a mesh server holds an answer for members'
// acknowledgements: a member that does not answer by then is cut off, and
// the answer goes out with what is known.
const heldTimeout = 3 * time.Second

// held is an answer a mesh server holds until its members acknowledge
// its grant to owner at epoch, or another claim beats the grant here.
type held struct {
	askers  []*linkState
	owner   string
	epoch   uint64
	waiting map[*linkState]bool
}

// acknowledgeLocked answers a mesh member's claims (its transfers to a
// world behind it, and adds with an epoch, won or lost here) with this node's state, and takes
// its answers as acknowledgements of this node's grants. An answer may
// carry a claim too (coalesced with it in the member's queue). The
// exchange ends: this node's answer names a world behind the member only
// when the member's claim won here. n.mu must be held.
func (n *Node) acknowledgeLocked(m *linkState, changes, answered []gameworld.Change) {
	for _, c := range answered {
		n.ackLocked(m, c.ID, c.Epoch)
	}
	for _, c := range changes {
		// A claim to an object the member never sent us comes as an add
		// with its epoch.
		claim := c.Type == gameworld.Transfer || c.Type == gameworld.Add
		if claim && c.Epoch != 0 && n.relation(m, c.Owner).InLinkChain {
			n.answerLocked(m, c.ID)
		}
	}
}

// holdLocked holds ls's answer about id, granted to owner at epoch, until
// every mesh member this node is linked to has acknowledged the grant, or
// a claim beats it here (supersededLocked). It reports false when there
// is no member to wait for. n.mu must be held.
func (n *Node) holdLocked(ls *linkState, id, owner string, epoch uint64) bool {
	waiting := map[*linkState]bool{}
	for _, m := range n.hub.order {
		if m.kind == ownership.Mesh && m.ready {
			waiting[m] = true
		}
	}
	if len(waiting) == 0 {
		return false
	}
	if n.xfer.held == nil {
		n.xfer.held = map[string]*held{}
	}
	h := n.xfer.held[id]
	if h == nil {
		h = &held{}
		n.xfer.held[id] = h
	}
	if !slices.Contains(h.askers, ls) {
		h.askers = append(h.askers, ls)
	}
	h.owner, h.epoch, h.waiting = owner, epoch, waiting
	time.AfterFunc(heldTimeout, func() {
		n.lock()
		defer n.mu.Unlock()
		if n.xfer.held[id] == h && h.epoch == epoch && !n.life.closed {
			n.log.Info("mesh members did not acknowledge a transfer in time; answering with what is known", "id", id, "epoch", epoch, "waiting", len(h.waiting))
			n.releaseHeldLocked(id)
		}
	})
	return true
}

// ackLocked takes a mesh member's answer about id, naming an owner at
// epoch, as its acknowledgement of what this node granted. n.mu must be
// held.
func (n *Node) ackLocked(m *linkState, id string, epoch uint64) {
	h := n.xfer.held[id]
	if h == nil || epoch < h.epoch || !h.waiting[m] {
		return // not yet seen by the member: its next answer will be
	}
	delete(h.waiting, m)
	if len(h.waiting) == 0 {
		n.releaseHeldLocked(id)
	}
}

// supersededLocked is told of every change of owner or removal applied
// here: an answer held for a grant that a claim has beaten (or whose
// object went) goes out at once. The grant lost for good, since of two
// claims the same one wins everywhere, so the asker's answer is known
// without waiting for the members. n.mu must be held.
func (n *Node) supersededLocked(r *gameworld.Record) {
	if h := n.xfer.held[r.ID]; h != nil && (r.Type == gameworld.Remove || r.Owner != h.owner || r.Epoch != h.epoch) {
		n.releaseHeldLocked(r.ID)
	}
}

// releaseHeldLocked sends the answers held about id. n.mu must be held.
func (n *Node) releaseHeldLocked(id string) {
	h := n.xfer.held[id]
	delete(n.xfer.held, id)
	for _, ls := range h.askers {
		if ls != nil {
			n.answerLocked(ls, id)
		}
	}
}
