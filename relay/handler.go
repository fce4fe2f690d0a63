package relay

import (
	"errors"
	"maps"
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

// spareRecords is the most changes of a message whose log records are
// made before the lock, in one piece: no more, for what one record still
// queued somewhere holds is the whole piece.
const spareRecords = 8

// incoming is what handleWorldChange works out of a message before it
// takes the lock: when it came, and memory for its records.
type incoming struct {
	born    int64
	spare   []peer.Record
	applied []gameworld.Record
}

// prepare works out what it can of wc without n.mu, while others' changes
// apply: each add's owner if unnamed, and what each update changes and
// whether it keeps its object within the quotas, which depend on the
// object alone and are taken as they are unless the object changes
// meanwhile (gameworld.Prepare).
func (n *Node) prepare(l *peer.Link, wc peer.WorldChange) incoming {
	var peerID string
	if md, ok := l.Metadata(); ok {
		peerID = md.Identifier
	}
	for i := range wc.Changes {
		c := &wc.Changes[i]
		if c.Owner == "" && c.Type == gameworld.Add {
			c.Owner = peerID
		}
		n.world.Prepare(c, n.quotaOf)
	}
	in := incoming{born: time.Now().UnixNano()}
	if len(wc.Changes) <= spareRecords {
		in.spare, in.applied = make([]peer.Record, len(wc.Changes)), make([]gameworld.Record, 0, len(wc.Changes))
	}
	return in
}

// handleWorldChange is the node's side of peer.Handler (wire.go).
func (n *Node) handleWorldChange(l *peer.Link, wc peer.WorldChange) {
	// A client's changes apply while the last flush's links are offered
	// its log outside the lock (unlocked.go): they only fill the next
	// log. What else may come of a message (transfers between nodes, a
	// sweep, a repair, a departure's return) waits for those offers.
	in := n.prepare(l, wc)
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
	res := n.world.ApplyInto(in.applied, wc.Changes, func(c gameworld.Change, existing *gameworld.Object) error {
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
	n.routeAt(res.Records, ls, in.born, in.spare)
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

// handleMetadata is the node's side of peer.Handler (wire.go). A
// peer's metadata goes through the same steps every time: an upstream's
// is kept (upstreamMetadataLocked); a downstream or mesh peer's chain is
// admitted (admitChainLocked: identifiers its token grants and no other
// connection holds) and claimed (claimChainLocked), its region and what
// the node's peer watchers make of it applied, and the peer told of
// tokens and refusals; the first makes the link ready and asks for a
// refresh both ways.
func (n *Node) handleMetadata(l *peer.Link, md peer.Metadata) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed {
		return
	}
	if ls.kind == ownership.Upstream {
		n.upstreamMetadataLocked(ls, md)
		return
	}
	next, refused, taken, ok := n.admitChainLocked(ls, &md)
	if !ok {
		return
	}
	gained, changed := n.claimChainLocked(ls, md, next)
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

// upstreamMetadataLocked keeps what an upstream's metadata says: resume
// tokens, worlds it refused, its chain; the first asks it for a refresh
// and sends it the transfer requests waiting. n.mu must be held.
func (n *Node) upstreamMetadataLocked(ls *linkState, md peer.Metadata) {
	n.keepTokensLocked(md)
	n.upstreamRefusedLocked(md.Refused, md.Taken)
	ls.chain = make(map[string]bool, len(md.IdentifierChain))
	for _, id := range md.IdentifierChain {
		ls.chain[id] = true
	}
	if !ls.askedRefresh {
		ls.askedRefresh = true
		ls.link.RequestRefresh()
		n.resendRequestsLocked(md)
		if n.up.onReady != nil {
			n.up.onReady()
		}
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
