package relay

import (
	"errors"
	"fmt"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Attachments. A peer that does not speak Solipsism (an Alloverse agent, a
// game engine on UDP) joins a node in-process as an Attachment: a
// downstream peer with a world identifier, held to exactly the rules of a
// downstream link. Its writes are checked with ownership.MayAccept against
// the stored owner and routed like a link's; what it receives is routed by
// ownership.MaySend; when it detaches, everything its identifier owns is
// removed. Nothing is encoded or decoded on the way.

// AttachOptions configures an Attachment. The zero value is an observer:
// it owns nothing, may write nothing, and (with a Receiver) receives the
// whole world.
type AttachOptions struct {
	// Identifier is the peer's world identifier (see
	// gameworld.IsIdentifier): objects it adds are owned by it, and it may
	// change and remove only those. Empty makes an observer. An identifier
	// another peer of the node already claims is refused.
	Identifier string
	// Interest and HasInterest are the region the peer wants, as in a
	// link's metadata (see Attachment.SetInterest); the zero value means
	// everything.
	Interest    []peer.Box
	HasInterest bool
	// Receiver, if not nil, receives what the node routes to the peer:
	// first every object it may see, then each change, once per tick (see
	// Receiver). Nil means the peer only writes.
	Receiver Receiver
}

// Receiver takes the changes a node routes to an Attachment.
//
// Like a Solipsism peer, an attachment is not sent its own objects: an
// observer (no identifier) is sent every object.
//
// Receive is called with the node's lock held, by one goroutine at a time,
// in the order the world applied the changes: it must not block and must
// not call the Node or any Attachment. The first call holds the world as
// the peer may see it, as adds; a change in the same tick that precedes it
// may name objects the receiver has not been told about. Deliveries and
// their properties are shared: read them, never modify them.
type Receiver interface {
	Receive(ds []Delivery)
}

// Delivery is one change routed to an Attachment. A Transfer gives the
// object a new owner and carries its whole state, like an add; it names
// only objects the receiver was given.
type Delivery struct {
	gameworld.Change
	// After is every property of the object after the change (nil for a
	// remove), so a receiver can take an add or an update as the object's
	// whole state.
	After gameworld.Properties
}

// ErrIdentifierClaimed is returned by Attach when another peer of the node
// already claims the identifier.
var ErrIdentifierClaimed = errors.New("relay: identifier already claimed")

// Attachment is an in-process peer of a Node. Its methods are safe for
// concurrent use.
type Attachment struct {
	n  *Node
	ls *linkState
	id uint64
	rx Receiver
	// buf is reused for each call of Receive; guarded by Node.mu.
	buf []Delivery
	// seen holds the slots of the objects the receiver has, as a link's
	// peer would: what leaves its region is removed only if it was there.
	seen map[uint32]struct{}
}

// Attach joins an in-process peer to the node as a downstream peer. Only
// servers and proxies serve downstream peers. Call Detach when it leaves.
func (n *Node) Attach(opts AttachOptions) (*Attachment, error) {
	if n.role != ownership.Server && n.role != ownership.Proxy {
		return nil, fmt.Errorf("relay: a %s node serves no downstream peers", n.role)
	}
	if opts.Identifier != "" && !gameworld.IsIdentifier(opts.Identifier) {
		return nil, fmt.Errorf("relay: identifier %q is not of the form prefix-XXXXXXXX-XXXXXXXX", opts.Identifier)
	}
	n.lock()
	defer n.mu.Unlock()
	if n.life.closed {
		return nil, ErrClosed
	}
	if opts.Identifier != "" {
		n.settleDepartureLocked(opts.Identifier)
	}
	if opts.Identifier == n.id || n.hub.claims[opts.Identifier] != nil {
		return nil, fmt.Errorf("%w: %s", ErrIdentifierClaimed, opts.Identifier)
	}
	n.hub.nextID++
	a := &Attachment{n: n, id: n.hub.nextID, rx: opts.Receiver}
	a.ls = &linkState{att: a, kind: ownership.Downstream, chain: map[string]bool{}, ready: true}
	n.hub.atts = append(n.hub.atts, a)
	if opts.Identifier != "" {
		a.ls.chain[opts.Identifier] = true
		n.hub.claims[opts.Identifier] = a.ls
		n.chainChanged()
	}
	if opts.HasInterest {
		n.setRegionLocked(a.ls, interest.Wants{Boxes: opts.Interest, HasBoxes: true})
	}
	if a.rx != nil {
		n.wantRefresh(a.ls)
	}
	return a, nil
}

// Identifier returns the attachment's world identifier; empty for an
// observer.
func (a *Attachment) Identifier() string {
	for id := range a.ls.chain {
		return id
	}
	return ""
}

// Apply applies the peer's changes and routes them. An add without an
// owner gets the attachment's identifier. Changes the peer may not make
// (ownership.MayAccept against the stored owner) are refused and listed in
// the result; property values must be JSON.
func (a *Attachment) Apply(changes []gameworld.Change) (gameworld.Applied, error) {
	n := a.n
	if err := ownChanges(changes, a.Identifier()); err != nil {
		return gameworld.Applied{}, err
	}
	n.lock()
	defer n.mu.Unlock()
	if n.life.closed {
		return gameworld.Applied{}, ErrClosed
	}
	if !a.attached() {
		return gameworld.Applied{}, errDetached
	}
	changes, requests := n.takeRequestsLocked(a.ls, changes)
	res := n.world.Apply(changes, func(c gameworld.Change, existing *gameworld.Object) error {
		return n.authorize(a.ls, ownership.Downstream, c, existing)
	})
	n.route(res.Records, a.ls)
	n.answerTransfers(a.ls, requests, res.Records)
	if n.opts.Validator != nil && len(res.Refused) > 0 {
		n.tellRefusedLocked(res.Refused)
	}
	return res, nil
}

var errDetached = errors.New("relay: attachment detached")

// attached reports whether a is still attached. n.mu must be held.
func (a *Attachment) attached() bool {
	for _, b := range a.n.hub.atts {
		if b == a {
			return true
		}
	}
	return false
}

// Detach removes the peer from the node, and with it every object its
// identifier owns. It is safe to call more than once.
func (a *Attachment) Detach() {
	n := a.n
	n.lock()
	defer n.mu.Unlock()
	for i, b := range n.hub.atts {
		if b == a {
			n.hub.atts = append(n.hub.atts[:i:i], n.hub.atts[i+1:]...)
			break
		}
	}
	if a.ls.region != nil {
		n.unregisterLocked(a.ls)
		a.ls.region = nil
		n.regionGoneLocked()
		n.chainChanged()
	}
	n.forgetAskerLocked(a.ls)
	if owned := n.hub.claimedBy(a.ls); len(owned) > 0 {
		n.releaseClaims(owned, nil)
		if !n.life.closed {
			n.chainChanged()
		}
	}
	a.ls.chain = map[string]bool{}
}

// offer hands the receiver the records it may receive. Before its first
// refresh these may name objects it does not know; the refresh follows in
// the same flush. n.mu must be held.
func (a *Attachment) offer(recs []*peer.Record, verdict func(int) peer.Verdict, full func(int) *peer.Record) {
	if a.rx == nil {
		return
	}
	a.buf = a.buf[:0]
	if a.seen == nil {
		a.seen = map[uint32]struct{}{}
	}
	for i, r := range recs {
		v := peer.Send
		if verdict != nil {
			v = verdict(i)
		}
		_, has := a.seen[r.Slot]
		d := Delivery{Change: r.Change}
		switch {
		case v == peer.Skip || v == peer.Echo:
			if r.Type == gameworld.Remove {
				delete(a.seen, r.Slot) // the slot may be reused
			}
			continue
		case v == peer.Reveal && has, v == peer.Keep && !has, v == peer.Hide && !has:
			continue
		case v == peer.Hide || r.Type == gameworld.Remove:
			// Gone, or out of the attachment's region.
			delete(a.seen, r.Slot)
			if !has {
				continue
			}
			d.Change = gameworld.Change{Type: gameworld.Remove, ID: r.ID, Owner: r.Owner}
			a.buf = append(a.buf, d)
			continue
		}
		a.seen[r.Slot] = struct{}{}
		switch {
		case r.Type == gameworld.Transfer && !has:
			// An object the receiver lacks arrives whole, as an add.
			d.Type, d.After = gameworld.Add, r.Properties
		case r.Type == gameworld.Add || r.Type == gameworld.Transfer:
			d.After = r.Properties
		case r.Type == gameworld.Update && full != nil:
			if f := full(i); f != nil {
				d.After = f.Properties
			}
		}
		a.buf = append(a.buf, d)
	}
	if len(a.buf) > 0 {
		a.rx.Receive(a.buf)
	}
	clear(a.buf)
	if cap(a.buf) > 4096 {
		a.buf = nil
	}
}
