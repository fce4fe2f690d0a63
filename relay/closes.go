package relay

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Links that close: a peer that leaves loses its objects at once, one
// whose connection broke keeps them for the reclaim grace, and a mesh
// member that is gone has its worlds held the same way.

// handleClose is the node's side of peer.Handler (wire.go).
func (n *Node) handleClose(l *peer.Link, err error) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.remove(l)
	if ls == nil {
		return
	}
	if ls.release != nil {
		go ls.release() // takes n.mu
	}
	if ls.region != nil {
		n.unregisterLocked(ls)
		ls.region = nil
		n.regionGoneLocked()
		if !n.life.closed {
			n.chainChanged()
		}
	}
	n.hub.totals.Add(l)
	n.forgetAskerLocked(ls)
	n.peerLeftLocked(ls)
	if ls.kind == ownership.Upstream {
		n.requestsLostLocked()
		// Keep what the upstream told us: on reconnect a refresh brings
		// it up to date, and downstream clients see no gap.
		return
	}
	if ls.kind == ownership.Mesh && n.hub.mesh != nil && !n.life.closed && n.hub.mesh.Alive(ls.member) {
		// memberlist still sees the member: keep its objects for the
		// re-dialed link instead of removing and re-adding them all.
		ls.detached = true
		if n.hub.mesh.Leaving() {
			// We left the mesh (shutting down): nothing was lost.
			n.log.Debug("mesh link closed: this node left the mesh", "member", ls.member)
			return
		}
		n.log.Info("mesh link lost; keeping the member's objects until it reconnects or is declared dead", "member", ls.member)
		return
	}
	owned := n.hub.claimedBy(ls)
	if len(owned) > 0 && ls.kind == ownership.Downstream && n.opts.ReclaimGrace > 0 && !n.life.closed && droppedAbnormally(err) {
		// The connection broke rather than closed: keep the peer's
		// objects for a while, so that a flapping link (a proxy whose
		// upstream connection drops and comes back) does not make them
		// vanish and reappear for everyone. A reconnecting link that
		// claims the identifiers takes them over.
		ls.detached = true
		time.AfterFunc(n.opts.ReclaimGrace, func() { n.expireDetached(ls) })
		n.log.Info("link dropped; keeping its objects for the reclaim grace period", "link", l.ID(), "worlds", len(owned), "grace", n.opts.ReclaimGrace, "err", err)
		return
	}
	if len(owned) > 0 {
		n.releaseClaims(owned, nil)
		if !n.life.closed {
			n.chainChanged()
		}
	}
	n.log.Debug("link closed", "link", l.ID(), "worlds", len(owned), "err", err)
}

// expireDetached removes what a dropped downstream link still claims once
// its grace period is over and nobody took it over.
func (n *Node) expireDetached(ls *linkState) {
	n.lock()
	defer n.mu.Unlock()
	if n.life.closed {
		return
	}
	if owned := n.hub.claimedBy(ls); len(owned) > 0 {
		if ls.kind == ownership.Mesh {
			n.log.Info("reclaim grace period over; removed the objects of a departed mesh member", "member", ls.member, "worlds", len(owned))
		} else {
			n.log.Info("reclaim grace period over; removing the dropped link's objects", "worlds", len(owned))
		}
		n.releaseClaims(owned, nil)
		n.chainChanged()
	}
}

// droppedAbnormally reports whether a link's close looks like a broken
// connection (no close frame, a stall, a failed keepalive, an error close)
// rather than a peer leaving (a normal or going-away close frame) or being
// sent away for bad input.
func droppedAbnormally(err error) bool {
	var de *peer.DecodeError
	if errors.As(err, &de) {
		return false
	}
	var ce *peer.CloseError
	if errors.As(err, &ce) {
		if ce.Remote {
			return ce.Code != peer.StatusNormal && ce.Code != peer.StatusGoingAway
		}
		// (A draining node's close: the peer goes on at another.)
		return ce.Code == peer.StatusStalled || ce.Code == peer.StatusGoingAway || ce.Code == peer.StatusServiceRestart
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// releaseGhosts drops what detached links of ls's member still claim and
// the new link did not: worlds that left that member while we were cut off.
// n.mu must be held.
func (n *Node) releaseGhosts(ls *linkState) {
	var stale []string
	for id, cl := range n.hub.claims {
		if cl != ls && cl.detached && cl.member == ls.member {
			stale = append(stale, id)
		}
	}
	n.releaseClaims(stale, nil)
}

// holdWorldsLocked gives the worlds ids to a claim without a link, kept for the
// reclaim grace as a dropped link's: a peer that claims one of them
// meanwhile (reconnecting here, or behind a mesh member) takes it over with
// its objects, and what is left then goes (expireDetached). kind is what
// the held worlds were behind: Downstream for worlds this node served
// before a restart, Mesh (with the member's name) for those of a member
// that is gone. Held worlds are not announced to anyone: they are nobody's
// to speak for until claimed. n.mu must be held.
func (n *Node) holdWorldsLocked(ids map[string]bool, kind ownership.LinkKind, member string) {
	held := &linkState{kind: kind, chain: ids, detached: true, member: member}
	for id := range ids {
		n.hub.claims[id] = held
	}
	time.AfterFunc(n.opts.ReclaimGrace, func() { n.expireDetached(held) })
}

// heldLocked reports whether ls is a claim without a link (holdWorldsLocked).
func heldLocked(ls *linkState) bool { return ls.link == nil && ls.att == nil }

// MemberGone closes any link to a member that memberlist declared dead
// or that left. The worlds behind it are held for the reclaim grace: its
// clients, reconnecting to another member at once, take their objects
// over without anyone seeing them go (a member's stop breaks their
// connections, as a crash would); what nobody claims by then is removed.
func (n *Node) MemberGone(member string) {
	n.lock()
	defer n.mu.Unlock()
	owned := map[string]bool{}
	for id, cl := range n.hub.claims {
		if cl.kind == ownership.Mesh && cl.member == member {
			owned[id] = true
		}
	}
	for _, ls := range n.hub.order {
		if ls.kind == ownership.Mesh && ls.member == member {
			ls.link.Close(peer.StatusGoingAway, "member left the mesh")
		}
	}
	if len(owned) == 0 {
		return
	}
	if n.opts.ReclaimGrace > 0 && !n.life.closed {
		n.holdWorldsLocked(owned, ownership.Mesh, member)
		n.log.Info("a mesh member is gone; keeping its worlds' objects for the reclaim grace period", "member", member, "worlds", len(owned), "grace", n.opts.ReclaimGrace)
		return
	}
	n.releaseClaims(slices.Collect(maps.Keys(owned)), nil)
	n.log.Info("removed the objects of a departed mesh member", "member", member, "worlds", len(owned))
}

// MemberLeft gives the objects a member that left the mesh on purpose
// owned itself (persistent objects fallen to it, released ones) to heir,
// the same member on every survivor (cluster.Mesh.MemberDown picks the lowest
// identifier of the membership). Each survivor makes the same transfer, at
// the next epoch, so they agree without a word, and nothing the member
// owned goes with it. Its clients' worlds are held as any gone member's
// (MemberGone).
func (n *Node) MemberLeft(id, heir string) {
	n.lock()
	defer n.mu.Unlock()
	if n.life.closed || id == "" || id == n.id || heir == "" {
		return
	}
	var changes []gameworld.Change
	n.world.Range(func(o gameworld.Object) bool {
		if o.Owner == id {
			changes = append(changes, gameworld.Change{Type: gameworld.Transfer, ID: o.ID, Owner: heir})
		}
		return true
	})
	if len(changes) == 0 {
		return
	}
	res := n.world.Apply(changes, nil)
	n.route(res.Records, nil)
	n.log.Info("a member left the mesh; its own objects go to a member", "member", id, "heir", heir, "objects", len(changes))
}
