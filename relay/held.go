package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
)

// Held answers: a mesh server holds a transfer's answer to its asker
// until the other members have acknowledged the grant (a
// transfer.Holds of the node's).

// heldTimeout bounds how long a mesh server holds an answer for members'
// acknowledgements: a member that does not answer by then is cut off, and
// the answer goes out with what is known.
const heldTimeout = 3 * time.Second

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
	var waiting []*linkState
	for _, m := range n.hub.order {
		if m.kind == ownership.Mesh && m.ready {
			waiting = append(waiting, m)
		}
	}
	if len(waiting) == 0 {
		return false
	}
	n.xfer.held.Hold(id, ls, owner, epoch, waiting)
	time.AfterFunc(heldTimeout, func() {
		n.lock()
		defer n.mu.Unlock()
		if left, ok := n.xfer.held.Holding(id, epoch); ok && !n.life.closed {
			n.log.Info("mesh members did not acknowledge a transfer in time; answering with what is known", "id", id, "epoch", epoch, "waiting", left)
			n.releaseHeldLocked(id)
		}
	})
	return true
}

// ackLocked takes a mesh member's answer about id, naming an owner at
// epoch, as its acknowledgement of what this node granted. n.mu must be
// held.
func (n *Node) ackLocked(m *linkState, id string, epoch uint64) {
	if askers, ok := n.xfer.held.Ack(id, m, epoch); ok {
		n.answerAllLocked(askers, id)
	}
}

// supersededLocked is told of every change of owner or removal applied
// here: an answer held for a grant that a claim has beaten (or whose
// object went) goes out at once. n.mu must be held.
func (n *Node) supersededLocked(r *gameworld.Record) {
	if n.xfer.held.Beaten(r.ID, r.Owner, r.Epoch, r.Type == gameworld.Remove) {
		n.releaseHeldLocked(r.ID)
	}
}

// releaseHeldLocked sends the answers held about id. n.mu must be held.
func (n *Node) releaseHeldLocked(id string) {
	n.answerAllLocked(n.xfer.held.Release(id), id)
}

// answerAllLocked makes the next flush tell askers (those still linked)
// the state of id. n.mu must be held.
func (n *Node) answerAllLocked(askers []*linkState, id string) {
	for _, ls := range askers {
		if ls != nil {
			n.answerLocked(ls, id)
		}
	}
}
