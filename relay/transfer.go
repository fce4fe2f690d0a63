package relay

import (
	"errors"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
)

// Ownership transfers (our extension; docs/protocol.md). A peer that
// speaks them asks for an object with a "transfer" record naming itself as
// owner and no epoch; the node that holds the peer's link decides by the
// transfer policy, gives the object the next epoch and routes the transfer
// like any change, so it reaches every node and peer as one record. Nodes
// pass transfers on with their epoch, and each node takes one only if its
// (epoch, owner) beats the object's current one (gameworld.Beats): of
// concurrent transfers, the same one wins everywhere. A transfer naming no
// owner (or this node) from the object's owner releases it to the node.
// The requester hears the outcome as a transfer record: its own when
// granted, the object's current owner when refused.

// Errors of transfer requests.
var (
	// ErrNotConnected: the request needs an upstream link, and none is
	// up.
	ErrNotConnected = errors.New("relay: not connected")
	// ErrNoTransfers: the upstream does not take part in ownership
	// transfers (a 2016 server).
	ErrNoTransfers = errors.New("relay: the upstream does not support ownership transfers")
	// ErrTransferRefused: the upstream refused the request (policy, or a
	// claim that won over it).
	ErrTransferRefused = errors.New("relay: ownership transfer refused")
)

// Reserved properties that mark an object for transfers.
const (
	PropTransferable = "transferable"
	PropPersistent   = "persistent"
)

// flagsOf reads an object's ownership markings.
func flagsOf(props gameworld.Properties) ownership.Flags {
	var f ownership.Flags
	switch string(props.Value(PropTransferable)) {
	case "true":
		f.Transferable, f.Marked = true, true
	case "false":
		f.Marked = true
	}
	f.Persistent = string(props.Value(PropPersistent)) == "true"
	return f
}

// isTransfer reports whether applying c to existing changes its owner:
// a transfer, or an add whose claim beats the stored one.
func isTransfer(c gameworld.Change, existing *gameworld.Object) bool {
	return c.Type == gameworld.Transfer ||
		(c.Type == gameworld.Add && existing != nil && c.Owner != existing.Owner &&
			gameworld.Beats(c.Epoch, c.Owner, existing.Epoch, existing.Owner))
}

// authorize decides whether a change arriving from ls (a link of the
// given kind, or an attachment as a downstream peer) may be applied. It is
// the one write rule of every kind of peer. n.mu must be held.
func (n *Node) authorize(ls *linkState, kind ownership.LinkKind, c gameworld.Change, existing *gameworld.Object) error {
	if existing != nil && isTransfer(c, existing) {
		return n.mayTransfer(ls, kind, c, existing)
	}
	owner := c.Owner
	if existing != nil {
		owner = existing.Owner
	}
	if owner == "" {
		return ownership.ErrNotOwner
	}
	if err := ownership.MayAccept(n.role, kind, n.relation(ls, owner)); err != nil {
		return err
	}
	if kind == ownership.Downstream {
		if err := n.checkQuota(c, existing, owner); err != nil {
			return err
		}
		return n.validate(c, existing)
	}
	return n.checkTrusted(ls, c, existing)
}

// misbelievedLocked reports whether a write refused from the downstream
// link ls shows that its peer believes it owns an object someone else
// holds: an add or update in the name of a world behind ls, of an object
// owned outside it. n.mu must be held.
func (n *Node) misbelievedLocked(ls *linkState, rf gameworld.Refusal) bool {
	if rf.Change.Type != gameworld.Add && rf.Change.Type != gameworld.Update || !errors.Is(rf.Err, ownership.ErrNotOwner) {
		return false
	}
	o, ok := n.world.Get(rf.Change.ID)
	return ok && n.relation(ls, rf.Change.Owner).InLinkChain && !n.relation(ls, o.Owner).InLinkChain
}

// settleCreationsLocked decides ids that were created twice, on two mesh
// members, before either heard of the other's object: each member first
// keeps its own, at epoch 0, and neither claim is a transfer. Of the two
// the greater owner's wins, as of equal epochs in transfers, so every
// member ends with the same object: an add from member m that ties so and
// wins here is applied as a transfer at epoch 0 (Stated), and the loser's
// creator is told like any old owner. n.mu must be held.
func (n *Node) settleCreationsLocked(m *linkState, changes []gameworld.Change) {
	for i, c := range changes {
		if c.Type != gameworld.Add || c.Epoch != 0 {
			continue
		}
		ex, ok := n.world.Get(c.ID)
		if !ok || ex.Epoch != 0 || c.Owner <= ex.Owner || !n.relation(m, c.Owner).InLinkChain || n.relation(m, ex.Owner).InLinkChain {
			continue
		}
		changes[i].Type, changes[i].Stated = gameworld.Transfer, true
	}
}

// mayTransfer decides a transfer of the existing object ex. n.mu must be
// held.
func (n *Node) mayTransfer(ls *linkState, kind ownership.LinkKind, c gameworld.Change, ex *gameworld.Object) error {
	if kind == ownership.Upstream {
		// The upstream's word stands (ownership.MayClaim).
		return ownership.MayClaim(n.role, kind, n.relation(ls, c.Owner))
	}
	if kind == ownership.Downstream && c.Owner == n.id {
		// A release: only the owner gives an object up.
		if !n.relation(ls, ex.Owner).InLinkChain {
			return ownership.ErrNotOwner
		}
		return nil
	}
	if err := ownership.MayClaim(n.role, kind, n.relation(ls, c.Owner)); err != nil {
		return err
	}
	switch {
	case c.Owner == ex.Owner:
		return ownership.ErrAlreadyOwner
	case c.Stated && kind == ownership.Mesh:
		return nil // settleCreationsLocked decided
	case c.Epoch == 0 && kind != ownership.Downstream:
		// Only a requester asks for the next epoch; nodes pass theirs on.
		return ownership.ErrStaleClaim
	case c.Epoch != 0 && !gameworld.Beats(c.Epoch, c.Owner, ex.Epoch, ex.Owner):
		return ownership.ErrStaleClaim
	case !n.opts.Transfers.Allows(flagsOf(ex.Properties)):
		return ownership.ErrNotTransferable
	case n.role == ownership.Proxy && !n.ownerInfo(ex.Owner).local:
		// A proxy decides only under a 2016 server (answers.go), and
		// that server would see only a remove of someone else's object.
		return ErrNoTransfers
	}
	return nil
}

// keepPersistentLocked gives every persistent object among those owned by
// departed identifiers to heir instead of removing it, at the next epoch,
// and returns the ids it kept. n.mu must be held.
func (n *Node) keepPersistentLocked(departed map[string]bool, heir string) map[string]bool {
	var changes []gameworld.Change
	n.world.Range(func(o gameworld.Object) bool {
		if departed[o.Owner] && flagsOf(o.Properties).Persistent {
			changes = append(changes, gameworld.Change{Type: gameworld.Transfer, ID: o.ID, Owner: heir})
		}
		return true
	})
	if len(changes) == 0 {
		return nil
	}
	res := n.world.Apply(changes, nil)
	n.route(res.Records, nil)
	kept := make(map[string]bool, len(changes))
	for _, c := range changes {
		kept[c.ID] = true
	}
	return kept
}
