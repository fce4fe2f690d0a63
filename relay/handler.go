package relay

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// What links report to their node (peer.Handler): changes, metadata and
// refresh requests from peers, and the metadata this node presents. Each
// method takes n.mu for its whole run, so a link's messages apply in the
// order they came, and every link sees the world's changes in one order.

// handleWorldChange is the node's side of peer.Handler (wire.go).
func (n *Node) handleWorldChange(l *peer.Link, wc peer.WorldChange) {
	// A client's changes apply while the last flush's links are offered
	// its log outside the lock (unlocked.go): they only fill the next
	// log. What else may come of a message (transfers between nodes, a
	// sweep, a repair, a departure's return) waits for those offers.
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed {
		return
	}
	if ls.kind != ownership.Downstream || ls.sweep != nil || ls.digest.Pending() || len(n.deps.departing) > 0 {
		n.settleLocked()
	}
	if !ls.ready {
		// Without metadata we cannot tell whose objects these are. The
		// refresh we asked for right after metadata brings them again.
		l.Stats().Refused.Add(uint64(len(wc.Changes)))
		n.log.Debug("refusing changes before metadata", "link", l.ID(), "records", len(wc.Changes))
		return
	}
	var peerID string
	if md, ok := l.Metadata(); ok {
		peerID = md.Identifier
	}
	for i := range wc.Changes {
		if wc.Changes[i].Owner == "" && wc.Changes[i].Type == gameworld.Add {
			wc.Changes[i].Owner = peerID
		}
	}
	var requests map[string]bool
	var answered []gameworld.Change
	switch ls.kind {
	case ownership.Downstream:
		wc.Changes, requests = n.takeRequestsLocked(ls, wc.Changes)
	case ownership.Upstream, ownership.Mesh:
		wc.Changes, answered = n.takeAnswersLocked(ls, wc.Changes)
	}
	if ls.kind == ownership.Mesh {
		n.settleCreationsLocked(ls, wc.Changes)
	}
	if ls.kind == ownership.Upstream {
		// The upstream's transfers state owners and epochs; none is a
		// request (an object never transferred is told with epoch 0).
		for i := range wc.Changes {
			wc.Changes[i].Stated = wc.Changes[i].Type == gameworld.Transfer
		}
		if len(n.deps.departing) > 0 {
			n.settleReturnsLocked(ls, wc.Changes)
		}
	}
	if _, ok := ls.digest.Answer(); ok {
		n.seeRepairLocked(ls, wc.Changes)
	} else if ls.digest.Waiting() {
		n.seeLateLocked(ls, wc.Changes)
	}
	res := n.world.Apply(wc.Changes, func(c gameworld.Change, existing *gameworld.Object) error {
		return n.authorize(ls, ls.kind, c, existing)
	})
	for _, rf := range res.Refused {
		if errors.Is(rf.Err, gameworld.ErrUnknownObject) {
			l.Stats().Ignored.Add(1)
			continue
		}
		l.Stats().Refused.Add(1)
		n.log.Debug("refused write", "link", l.ID(), "type", rf.Change.Type.String(), "id", rf.Change.ID, "owner", rf.Change.Owner, "err", rf.Err)
	}
	// The peer knows what it sent us (Echo), so a later remove may be
	// relayed to it.
	n.route(res.Records, ls)
	if len(res.Refused) > 0 {
		n.askForGapsLocked(ls, res.Refused)
		if n.opts.Validator != nil {
			n.tellRefusedLocked(res.Refused)
		}
	}
	switch ls.kind {
	case ownership.Downstream:
		// A refused claim from a proxy is answered too: the proxy takes
		// our word over its own. So is a write to an object the peer
		// believes its own but someone else holds (an id it created
		// while another peer did): told who owns it, the peer stops
		// believing so, where otherwise it would for good.
		speaks := ls.link.Transfers()
		for _, rf := range res.Refused {
			if rf.Change.Type == gameworld.Transfer || (speaks && n.misbelievedLocked(ls, rf)) {
				if requests == nil {
					requests = map[string]bool{}
				}
				requests[rf.Change.ID] = true
			}
		}
		n.answerTransfers(ls, requests, res.Records)
	case ownership.Upstream:
		for _, c := range answered {
			n.answeredLocked(c.ID)
		}
	case ownership.Mesh:
		n.acknowledgeLocked(ls, wc.Changes, answered)
	}
	if ls.sweep != nil {
		ls.sweep.see(wc.Changes)
		switch {
		case wc.Refreshed:
			n.finishSweep(ls)
		case time.Now().After(ls.sweep.deadline) && ls.kind == ownership.Downstream:
			// A 2016 peer marks nothing, but it sends its whole world with
			// every flush: what it has not sent by now, it no longer has.
			n.finishSweep(ls)
		case time.Now().After(ls.sweep.deadline):
			n.log.Info("upstream never marked its refresh answer complete; keeping objects learned before the reconnect")
			ls.sweep = nil
		}
	}
}

// handleRequestRefresh is the node's side of peer.Handler (wire.go).
func (n *Node) handleRequestRefresh(l *peer.Link) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil {
		return
	}
	if !ls.ready {
		ls.refreshPending = true
		return
	}
	n.wantRefresh(ls)
}

// handleMetadata is the node's side of peer.Handler (wire.go).
func (n *Node) handleMetadata(l *peer.Link, md peer.Metadata) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed {
		return
	}
	if ls.kind == ownership.Upstream {
		n.keepTokensLocked(md)
		n.upstreamRefusedLocked(md.Refused, md.Taken)
		ls.chain = make(map[string]bool, len(md.IdentifierChain))
		for _, id := range md.IdentifierChain {
			ls.chain[id] = true
		}
		if !ls.askedRefresh {
			ls.askedRefresh = true
			l.RequestRefresh()
			n.resendRequestsLocked(md)
			if n.up.onReady != nil {
				n.up.onReady()
			}
		}
		return
	}
	if ls.kind == ownership.Mesh && !gameworld.IsIdentifier(md.Identifier) {
		// Every node's identifier has the form (New refuses others): a
		// member that presents another is not one of ours.
		n.log.Warn("refused a mesh member whose identifier is not a node's", "identifier", md.Identifier, "link", l.ID())
		l.Close(peer.StatusPolicy, "a mesh member's identifier must be of the form prefix-XXXXXXXX-XXXXXXXX")
		return
	}
	next := make(map[string]bool, len(md.IdentifierChain))
	for _, id := range md.IdentifierChain {
		if id == n.id {
			l.Close(peer.StatusPolicy, "identifierChain claims this node's identifier")
			return
		}
		next[id] = true
	}
	var refused []string
	if ls.kind == ownership.Downstream {
		// The peer's own identifier must be granted. A world behind a peer
		// that speaks refusals (a proxy's client) that its token does not
		// cover is refused alone: not claimed, so its writes are refused,
		// and the peer is told, so that it closes that world's link rather
		// than lose its own.
		kept := md.IdentifierChain[:0:0]
		for _, id := range md.IdentifierChain {
			switch {
			case ls.grant.Allows(id):
				kept = append(kept, id)
			case id == md.Identifier || !md.Has(peer.FeatureRefused):
				// (A peer that would not understand a refusal of one of
				// its worlds, a browser's worker speaking for its page
				// say, is refused whole, as it can tell its user.)
				n.log.Info("refused a claim its token does not grant", "identifier", id, "link", l.ID())
				n.life.metrics.Limited("unauthorized")
				l.Close(peer.StatusUnauthorized, "the token does not grant identifier "+id)
				return
			default:
				n.log.Info("refused a world behind a peer: its token does not grant it", "identifier", id, "link", l.ID(), "peer", md.Identifier)
				n.life.metrics.Limited("unauthorized")
				refused = append(refused, id)
				delete(next, id)
			}
		}
		md.IdentifierChain = kept
	}
	// An identifier another connection holds (without the token that
	// would take it over) is refused: the peer's own, or any of a peer
	// that does not speak refusals, by closing the link; a world behind a
	// peer that does (a proxy's client) alone, as for tokens above.
	var taken []string
	for _, id := range n.takenClaims(ls, md) {
		if id == md.Identifier || !md.Has(peer.FeatureRefused) {
			n.log.Info("refused a claim to an identifier held by another connection", "identifier", id, "link", l.ID())
			n.life.metrics.Limited("identity_taken")
			l.Close(peer.StatusIdentityTaken, "identifier "+id+" is held by another connection; present its resume token")
			return
		}
		n.log.Info("refused a world behind a peer: another connection holds it", "identifier", id, "link", l.ID(), "peer", md.Identifier)
		n.life.metrics.Limited("identity_taken")
		taken = append(taken, id)
		delete(next, id)
	}
	if len(taken) > 0 {
		// (A new slice: md's shares its array with the link's copy.)
		md.IdentifierChain = slices.DeleteFunc(slices.Clone(md.IdentifierChain), func(id string) bool { return slices.Contains(taken, id) })
	}
	changed := false
	gained := false
	var gone, joined []string
	for id := range ls.chain {
		if !next[id] {
			gone = append(gone, id)
		}
	}
	for id := range next {
		if ls.chain[id] {
			continue
		}
		n.settleDepartureLocked(id)
		other := n.hub.claims[id]
		if ls.kind == ownership.Mesh && other != nil && other.kind == ownership.Downstream && !heldLocked(other) && !other.detached || other != nil && other.att != nil {
			// A client connected here speaks for itself; a mesh peer's
			// stale view of it does not override that (one whose link
			// dropped, kept for the reclaim grace, has gone on at that
			// member). Nor does anyone take over an attached peer's
			// identifier: it is live until it detaches.
			continue
		}
		changed = true
		if other != nil && other != ls {
			// The newest claim wins: a reconnecting peer takes over its
			// identifiers (and objects) from a connection not yet timed out,
			// or dropped within the grace period. Its refresh answer then
			// tells which of those objects it no longer has.
			if other.detached && ls.kind == ownership.Downstream {
				if ls.sweep == nil {
					ls.sweep = newSweep()
				}
				ls.sweep.claim(id)
			}
			delete(other.chain, id)
			if heldLocked(other) {
				// Held since a restart (persist.go) or since its member
				// left the mesh (MemberGone).
				n.log.Info("held identifier reclaimed", "identifier", id, "link", l.ID())
			} else {
				if omd, _ := other.link.Metadata(); omd.Identifier == id {
					other.link.Close(peer.StatusReplaced, "identifier claimed by a newer connection")
				}
				n.log.Info("identifier moved to newer link", "identifier", id, "from", other.link.ID(), "to", l.ID())
			}
		}
		n.hub.claims[id] = ls
		ls.chain[id] = true
		gained = true
		joined = append(joined, id)
	}
	if (gained || len(gone) > 0) && n.log.Enabled(n.life.ctx, slog.LevelDebug) {
		n.log.Debug("chain changed", "link", l.ID(), "kind", ls.kind.String(), "gained", firstOf(joined), "gone", firstOf(gone))
	}
	if len(gone) > 0 {
		changed = true
		// The peer node that held them gives their persistent objects to
		// itself; we make the same claim.
		n.releaseClaimsTo(gone, ls, md.Identifier)
		for _, id := range gone {
			delete(ls.chain, id)
		}
	}
	if n.interestChangedLocked(ls, md) {
		changed = true // the union announced upstream and to the mesh
	}
	n.peerChangedLocked(ls, md)
	if gained || len(refused) > 0 || len(taken) > 0 {
		n.sendTokensLocked(ls, refused, taken)
	}
	first := !ls.ready
	ls.ready = true
	if first {
		l.RequestRefresh()
	}
	if first && ls.kind == ownership.Mesh {
		n.releaseGhosts(ls)
	}
	if first || ls.refreshPending {
		ls.refreshPending = false
		n.wantRefresh(ls)
	}
	if changed {
		n.chainChanged()
	}
}

// localMetadata is the node's side of peer.Handler (wire.go): toward upstream and mesh links a
// node advertises itself and every world behind its downstream links.
func (n *Node) localMetadata(l *peer.Link) peer.Metadata {
	n.lock()
	defer n.mu.Unlock()
	if ls := n.hub.links[l]; ls != nil && ls.kind == ownership.Downstream {
		return n.tokenMetadataLocked(ls)
	}
	return n.localMetadataLocked(l.Kind())
}

// localMetadataLocked is LocalMetadata for a link of the given kind. n.mu
// must be held.
func (n *Node) localMetadataLocked(kind ownership.LinkKind) peer.Metadata {
	return n.chainMetadataLocked(kind, false)
}

// chainMetadataLocked is localMetadataLocked, with the worlds whose
// departure is under way if departing (for an upstream that must be sent
// their removes: see departsOnMetadata). n.mu must be held.
func (n *Node) chainMetadataLocked(kind ownership.LinkKind, departing bool) peer.Metadata {
	md := peer.Metadata{Identifier: n.id, IdentifierChain: []string{n.id}, Role: n.role.String(), Features: []string{peer.FeatureOwnership, peer.FeatureDigest, peer.FeatureRefused, peer.FeatureDeparted, peer.FeatureMessages, peer.FeatureScopes}}
	if kind == ownership.Downstream {
		return md
	}
	if kind == ownership.Upstream && len(n.up.tokens) > 0 {
		// A copy: the link encodes it later, while an upstream's next
		// metadata may add tokens to n.up.tokens.
		md.ResumeTokens = maps.Clone(n.up.tokens)
	}
	switch {
	case kind == ownership.Upstream && n.opts.Interest != nil:
		md.Interest, md.HasInterest = n.opts.Interest, true
	case n.role == ownership.Client:
		md.Interest, md.HasInterest = n.up.interest, n.up.interest != nil
	default:
		md.Interest, md.HasInterest = n.unionInterestLocked()
	}
	if n.role == ownership.Client {
		md.Rooms, md.HasRooms = n.up.rooms, n.up.rooms != nil
		md.Budget = n.opts.Budget
	} else {
		md.Rooms, md.HasRooms = n.unionRoomsLocked()
	}
	for id, ls := range n.hub.claims {
		if ls.kind == ownership.Downstream && !heldLocked(ls) && (departing || len(n.deps.departing) == 0 || n.deps.departing[id] == nil) {
			md.IdentifierChain = append(md.IdentifierChain, id)
		}
	}
	sort.Strings(md.IdentifierChain[1:])
	return md
}

// firstOf returns at most the first five of ids, for a log line.
func firstOf(ids []string) []string { return ids[:min(len(ids), 5)] }
