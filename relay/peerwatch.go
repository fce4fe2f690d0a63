package relay

import (
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/presence"
)

// PeerWatcher is the seam for a capability that follows the node's
// downstream peers, as presence does: it is told when a peer's metadata
// arrives or changes (the peer speaking for its world), and when the peer
// leaves or stops speaking for it, and returns changes to objects of the
// node's own, which the node applies and routes at once, in order with
// what caused them. Adds without an owner get the node's identifier; a
// change to another world's object is ignored.
//
// Concurrency: its methods are called with the node's lock held, one
// event at a time, and must not call the Node. key identifies the peer:
// the same comparable value for each of its events.
type PeerWatcher interface {
	PeerChanged(key any, md peer.Metadata) []gameworld.Change
	PeerLeft(key any) []gameworld.Change
}

// PropPresence is the property naming the world a presence object stands
// for (package presence).
const PropPresence = presence.Prop

// peerWatchers returns the watchers of a new node: its presence tracker,
// then opts'.
func peerWatchers(opts Options) []PeerWatcher {
	return append([]PeerWatcher{presence.New(opts.RoomProperty)}, opts.PeerWatchers...)
}

// peerChangedLocked tells the watchers that ls's peer announced md. n.mu
// must be held.
func (n *Node) peerChangedLocked(ls *linkState, md peer.Metadata) {
	if ls.kind != ownership.Downstream || ls.link == nil {
		return
	}
	speaks := n.hub.claims[md.Identifier] == ls
	for _, w := range n.hub.watchers {
		if speaks {
			n.applyOwnLocked(w.PeerChanged(ls, md))
		} else {
			n.applyOwnLocked(w.PeerLeft(ls))
		}
	}
}

// peerLeftLocked tells the watchers that ls's peer left. n.mu must be
// held.
func (n *Node) peerLeftLocked(ls *linkState) {
	if ls.kind != ownership.Downstream || ls.link == nil {
		return
	}
	for _, w := range n.hub.watchers {
		n.applyOwnLocked(w.PeerLeft(ls))
	}
}

// applyOwnLocked applies changes to objects of this node's own and routes
// them. n.mu must be held.
func (n *Node) applyOwnLocked(changes []gameworld.Change) {
	if len(changes) == 0 || n.life.closed {
		return
	}
	for i := range changes {
		if changes[i].Type == gameworld.Add && changes[i].Owner == "" {
			changes[i].Owner = n.id
		}
	}
	res := n.world.Apply(changes, func(c gameworld.Change, existing *gameworld.Object) error {
		if existing != nil && existing.Owner != n.id || existing == nil && c.Owner != n.id {
			return gameworld.ErrUnknownObject
		}
		return nil
	})
	n.route(res.Records, nil)
}
