package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/transfer"
)

// Transfer requests and their answers.
//
// One node decides each request: the root of a proxy chain (a server),
// never a proxy or client below it whose upstream takes part in
// transfers. A proxy checks that the asker may make the request, passes it
// on and, when the upstream's answer (a transfer record marked "answer")
// comes back, tells its asker. It keeps at most one request per object in
// flight, so that each answer belongs to exactly one request whatever the
// links coalesce; others wait their turn. Deciding anywhere else would
// let two nodes grant the same epoch to two askers, each sure of its own
// word (the upstream's stands below it, the claim with the greater
// identifier above).
//
// A server in a mesh grants at once, but holds the asker's answer until
// every mesh member it could reach has acknowledged the grant (answered
// it with a state of at least the grant's epoch). Members pass on only
// their own grants and each answers after what it routed before, so by
// then this node has heard every concurrent claim, and its answer is the
// outcome the whole mesh agrees on.

// asker waits for the upstream's answer to a transfer request: a
// downstream link or attachment (ls), told by a transfer record at the
// next flush, or a caller of the node (ch), sent the object's state after
// the answer. One of the two is set; a departed ls is nil.
type asker struct {
	ls  *linkState
	ch  chan answer
	req gameworld.Change
}

// answer is what a caller of the node hears: the object's owner after its
// request, or gone when the object no longer exists.
type answer struct {
	owner string
	gone  bool
	err   error
}

// upstreamDecidesLocked reports whether this node's transfer requests are
// decided upstream, and the upstream link to send them on (nil while
// none is connected: requests are then refused). Until the upstream's
// metadata says whether it takes part in transfers, requests wait for it
// (sendRequestsLocked). A proxy under a 2016 server decides for itself.
// n.mu must be held.
func (n *Node) upstreamDecidesLocked() (*linkState, bool) {
	if n.role == ownership.Server {
		return nil, false
	}
	for _, ls := range n.hub.order {
		if ls.kind != ownership.Upstream || !ls.ready {
			continue
		}
		if md, ok := ls.link.Metadata(); ok && !md.Has(peer.FeatureOwnership) {
			return ls, false
		}
		return ls, true
	}
	return nil, true
}

// takeRequestsLocked takes the transfer requests (transfers without an
// epoch) out of changes from a downstream peer ls, and returns the
// changes to apply and the ids whose requests this node answers itself at
// the next flush. Where this node decides, requests stay among the
// changes (a release names this node as the new owner) and are all
// answered. Where its upstream decides, requests the asker may make are
// passed on (askLocked) and the others answered with the object as it
// is. n.mu must be held.
func (n *Node) takeRequestsLocked(ls *linkState, changes []gameworld.Change) ([]gameworld.Change, map[string]bool) {
	var requests map[string]bool
	answerNow := func(id string) {
		if requests == nil {
			requests = map[string]bool{}
		}
		requests[id] = true
	}
	up, upDecides := n.upstreamDecidesLocked()
	out := changes[:0]
	for _, c := range changes {
		if c.Type != gameworld.Transfer || c.Epoch != 0 {
			out = append(out, c)
			continue
		}
		c.Properties = gameworld.Properties{} // the object keeps its own
		if !upDecides {
			if c.Owner == "" {
				c.Owner = n.id
			}
			out = append(out, c)
			answerNow(c.ID)
			continue
		}
		if err := n.mayAskLocked(ls, c); up == nil || err != nil {
			if errors.Is(err, gameworld.ErrUnknownObject) && ls.link != nil {
				ls.link.Stats().Ignored.Add(1)
			}
			answerNow(c.ID)
			continue
		}
		n.askLocked(asker{ls: ls, req: c})
	}
	return out, requests
}

// mayAskLocked checks a request that this node passes on: the asker
// claims an object for a world it speaks for, or releases one such a
// world owns. The upstream checks the rest (policy, epochs). n.mu must be
// held.
func (n *Node) mayAskLocked(ls *linkState, c gameworld.Change) error {
	o, ok := n.world.Get(c.ID)
	switch {
	case !ok:
		return gameworld.ErrUnknownObject
	case c.Owner == "":
		if !n.relation(ls, o.Owner).InLinkChain {
			return ownership.ErrNotOwner
		}
	case !n.relation(ls, c.Owner).InLinkChain:
		return ownership.ErrNotOwner
	case c.Owner == o.Owner:
		return ownership.ErrAlreadyOwner
	}
	return nil
}

// askLocked queues a request for the upstream: it is sent at the next
// flush, after the changes routed before (a release follows the owner's
// last writes), unless one for the same object is in flight. n.mu must be
// held.
func (n *Node) askLocked(a asker) {
	same := func(b asker) bool { return a.ls != nil && b.ls == a.ls && b.req.Owner == a.req.Owner }
	if n.xfer.asked.Add(a.req.ID, a, same) {
		n.sendNextLocked(a.req.ID)
	}
}

// sendNextLocked puts the first request for id in flight. n.mu must be
// held.
func (n *Node) sendNextLocked(id string) {
	a, ok := n.xfer.asked.Send(id)
	if !ok {
		return
	}
	n.fan.requests = append(n.fan.requests, a.req)
	n.fan.answers = true
	if n.opts.Tick == peer.Immediate {
		n.flushLocked()
	}
}

// sendRequestsLocked sends the upstream link up the requests due, after
// what the flush offered it. n.mu must be held.
func (n *Node) sendRequestsLocked(up *linkState) {
	reqs := n.fan.requests
	n.fan.requests = n.fan.requests[:0]
	if _, ok := up.link.Metadata(); !ok {
		// Not before we know it takes part in transfers (a 2016 server
		// would not survive one): they go when its metadata arrives.
		for _, c := range reqs {
			n.xfer.asked.Unsent(c.ID)
		}
		return
	}
	recs := make([]*peer.Record, 0, len(reqs))
	for _, c := range reqs {
		if o, ok := n.world.Get(c.ID); ok {
			recs = append(recs, peer.NewRecord(c, o.Slot))
		} else {
			n.goneLocked(c.ID)
		}
	}
	if len(recs) > 0 {
		up.link.Offer(recs, func(int) peer.Verdict { return peer.Send }, nil, true)
	}
}

// answeredLocked takes the upstream's answer for an object: the request in
// flight is answered, and the next one sent. n.mu must be held.
func (n *Node) answeredLocked(id string) {
	if a, ok := n.xfer.asked.Answered(id); ok {
		n.tellLocked(a, false)
		n.sendNextLocked(id)
	}
}

// goneLocked answers every request for an object that went away. n.mu
// must be held.
func (n *Node) goneLocked(id string) {
	for _, a := range n.xfer.asked.Gone(id) {
		n.tellLocked(a, true)
	}
}

// tellLocked answers a: a link at the next flush (a departed object it
// hears of as a remove), a caller at once. n.mu must be held.
func (n *Node) tellLocked(a asker, gone bool) {
	switch {
	case a.ch != nil:
		o, ok := n.world.Get(a.req.ID)
		a.ch <- answer{owner: o.Owner, gone: gone || !ok}
	case a.ls != nil && !gone:
		n.answerLocked(a.ls, a.req.ID)
	}
}

// requestsLostLocked is called when the upstream link closes: the
// requests in flight on it will not be answered, and go again on the next
// upstream link (resendRequestsLocked). n.mu must be held.
func (n *Node) requestsLostLocked() {
	n.xfer.asked.Lost()
	n.fan.requests = n.fan.requests[:0]
}

// resendRequestsLocked is called when an upstream link's metadata has
// arrived: waiting requests go to it, or, if it does not take part in
// transfers, are answered with the objects as they are. n.mu must be held.
func (n *Node) resendRequestsLocked(md peer.Metadata) {
	if md.Has(peer.FeatureOwnership) {
		for _, id := range n.xfer.asked.Waiting() {
			n.sendNextLocked(id)
		}
		return
	}
	for _, askers := range n.xfer.asked.Clear() {
		for _, a := range askers {
			if a.ch != nil {
				a.ch <- answer{err: ErrNoTransfers}
			} else {
				n.tellLocked(a, false)
			}
		}
	}
}

// forgetAskerLocked drops a departed link from the requests it waits
// on, and from the answers held for it. n.mu must be held.
func (n *Node) forgetAskerLocked(ls *linkState) {
	n.xfer.asked.Edit(func(a *asker) {
		if a.ls == ls {
			a.ls = nil
		}
	})
	for _, id := range n.xfer.held.Forget(ls) {
		n.releaseHeldLocked(id)
	}
}

// TransferAnswer is the upstream's answer to a transfer request.
type TransferAnswer struct {
	// Owner is the object's owner after the request.
	Owner string
	// Gone is set when the object no longer exists.
	Gone bool
}

// RequestTransfer asks the upstream to give object id to owner (the
// node's own identifier to take it, "" to give it back to the server)
// and waits for the answer, or for ctx. It fails with ErrNotConnected
// without an upstream, ErrNoTransfers if the upstream takes no requests,
// and gameworld.ErrUnknownObject if the node does not hold id.
func (n *Node) RequestTransfer(ctx context.Context, id, owner string) (TransferAnswer, error) {
	a, err := n.ask(ctx, gameworld.Change{Type: gameworld.Transfer, ID: id, Owner: owner})
	return TransferAnswer{Owner: a.owner, Gone: a.gone}, err
}

// ask sends a transfer request to the upstream and waits for its answer,
// or for ctx.
func (n *Node) ask(ctx context.Context, req gameworld.Change) (answer, error) {
	ch := make(chan answer, 1)
	n.lock()
	if n.life.closed {
		n.mu.Unlock()
		return answer{}, ErrClosed
	}
	up, upDecides := n.upstreamDecidesLocked()
	switch {
	case up == nil:
		n.mu.Unlock()
		return answer{}, ErrNotConnected
	case !upDecides:
		n.mu.Unlock()
		return answer{}, ErrNoTransfers
	}
	if _, ok := n.world.Get(req.ID); !ok {
		n.mu.Unlock()
		return answer{}, fmt.Errorf("relay: %w: %s", gameworld.ErrUnknownObject, req.ID)
	}
	n.askLocked(asker{ch: ch, req: req})
	n.mu.Unlock()
	select {
	case a := <-ch:
		return a, a.err
	case <-ctx.Done():
		n.lock()
		n.xfer.asked.Edit(func(a *asker) {
			if a.ch == ch {
				a.ch = nil // its answer is not wanted
			}
		})
		n.mu.Unlock()
		return answer{}, ctx.Err()
	}
}

// takeAnswersLocked lists the answers among changes from an upstream or
// mesh link, and returns the changes to apply. An upstream's answer is
// applied like any of its transfers, unless it restates what this node
// has (a refused request). A mesh member's answer is its acknowledgement
// (acknowledgeLocked), applied only where it is a claim the member could
// make, for a world behind it: a links' queue may have coalesced the
// member's own transfer into it. n.mu must be held.
func (n *Node) takeAnswersLocked(ls *linkState, changes []gameworld.Change) (rest, answered []gameworld.Change) {
	rest = changes[:0]
	for _, c := range changes {
		if c.Type == gameworld.Transfer && c.Answer {
			answered = append(answered, c)
			if ls.kind == ownership.Mesh && !n.relation(ls, c.Owner).InLinkChain {
				continue
			}
		}
		if c.Type == gameworld.Transfer && ls.kind == ownership.Upstream {
			if o, ok := n.world.Get(c.ID); ok && o.Owner == c.Owner && o.Epoch == c.Epoch {
				continue // nothing changes, and nobody need hear of it
			}
		}
		rest = append(rest, c)
	}
	return rest, answered
}

// answerTransfers tells a downstream peer that asked for transfers how
// each ended, at the next flush, after the changes routed before, so the
// answer is never older than what the peer already heard. A grant that
// mesh members may contest is held until they acknowledge it
// (holdLocked). recs are the records the peer's changes produced. n.mu
// must be held.
func (n *Node) answerTransfers(ls *linkState, requests map[string]bool, recs []gameworld.Record) {
	for id := range requests {
		var grant *gameworld.Record
		for i := range recs {
			if recs[i].ID == id && recs[i].Type == gameworld.Transfer {
				grant = &recs[i]
			}
		}
		if grant == nil || !n.holdLocked(ls, id, grant.Owner, grant.Epoch) {
			n.answerLocked(ls, id)
		}
	}
}

// answerLocked makes the next flush tell ls the state of id. n.mu must be
// held.
func (n *Node) answerLocked(ls *linkState, id string) {
	if ls.answers == nil {
		ls.answers = map[string]bool{}
	}
	ls.answers[id] = true
	n.fan.answers = true
	if n.opts.Tick == peer.Immediate {
		n.flushLocked()
	}
}

// sendAnswersLocked sends ls its due transfer answers. n.mu must be held.
func (n *Node) sendAnswersLocked(ls *linkState) {
	if len(ls.answers) == 0 {
		return
	}
	recs := make([]*peer.Record, 0, len(ls.answers))
	for id := range ls.answers {
		if o, ok := n.world.Get(id); ok {
			r := peer.NewRecord(gameworld.Change{Type: gameworld.Transfer, ID: o.ID, Owner: o.Owner,
				Epoch: o.Epoch, Properties: o.Properties, Answer: true, Scopes: o.Scopes.Snapshots()}, o.Slot)
			r.ObjectScopes = o.Scopes
			recs = append(recs, r)
		}
	}
	ls.answers = nil
	send := func(int) peer.Verdict { return peer.Send }
	switch {
	case ls.att != nil:
		ls.att.offer(recs, send, nil)
	case ls.link != nil:
		ls.link.Offer(recs, send, nil, true)
	}
}

// transfers are the transfer requests waiting for the upstream's answer,
// and the answers a mesh server holds for its members' acknowledgements,
// by object (answers.go).
type transfers struct {
	asked transfer.Requests[asker]
	held  transfer.Holds[*linkState]
}
