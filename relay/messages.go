package relay

import (
	"errors"
	"fmt"

	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Ephemeral messages (peer.AppMessage). A message goes where a change of
// an object its sender owns would go, by the same ownership rules: up
// from the world that sent it, down to every peer but the sender's, to
// mesh members only from their own side (split horizon). Its target
// narrows that: one world (only the way to it), or one room. It is
// stamped with its sender where it enters, so no one downstream can
// forge one: a peer may name as sender only a world its link holds.
// Messages take their place in the shared log, so that each peer gets a
// sender's changes and messages in the order the sender made them, and
// ask for a flush at once: they are for now, and never stored.

// msgMark is a message waiting in the shared log.
type msgMark struct {
	at   int
	m    peer.AppMessage
	enc  []byte
	from *linkState
	oi   ownerInfo
}

// MessageHandler receives the messages that reach a node (see
// Node.SubscribeMessages).
type MessageHandler func(peer.AppMessage)

// msgSubs are a node's message subscribers. Guarded by Node.mu.
type msgSubs struct {
	next int
	fns  map[int]MessageHandler
}

// SubscribeMessages calls fn for every message that reaches this node:
// sent to everyone, to this node's world, or to a room this node is in
// (all rooms, if it announces none). fn is called in order, with the
// node's lock held: it must not block for long or call the node. The
// returned function ends the subscription.
func (n *Node) SubscribeMessages(fn MessageHandler) (cancel func()) {
	n.lock()
	defer n.mu.Unlock()
	if n.fan.subs.fns == nil {
		n.fan.subs.fns = map[int]MessageHandler{}
	}
	id := n.fan.subs.next
	n.fan.subs.next++
	n.fan.subs.fns[id] = fn
	return func() {
		n.lock()
		delete(n.fan.subs.fns, id)
		n.mu.Unlock()
	}
}

// ErrBadMessage is matched (errors.Is) by the errors of Publish for a
// message that breaks the protocol's rules.
var ErrBadMessage = errors.New("relay: bad message")

// Publish sends a message from this node's world, as a peer's message
// would go. Its From is this node's identifier, whatever it says.
func (n *Node) Publish(m peer.AppMessage) error {
	m.From = n.id
	if err := checkAppMessage(m); err != nil {
		return err
	}
	n.lock()
	defer n.mu.Unlock()
	if n.life.closed {
		return ErrClosed
	}
	n.postLocked(m, nil, n.ownerInfo(m.From))
	return nil
}

// checkAppMessage applies the decoder's rules to a message made here.
func checkAppMessage(m peer.AppMessage) error {
	enc, err := peer.DecodeMessage(peer.AppendAppMessage(nil, m))
	if err == nil {
		_, err = peer.Limits{}.DecodeAppMessage(enc.Data)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadMessage, err)
	}
	return nil
}

// handleAppMessage is the node's side of peer.AppMessageHandler (wire.go).
func (n *Node) handleAppMessage(l *peer.Link, m peer.AppMessage) {
	n.lock()
	defer n.mu.Unlock()
	ls := n.hub.links[l]
	if ls == nil || n.life.closed {
		return
	}
	if m.From == "" {
		if md, ok := l.Metadata(); ok {
			m.From = md.Identifier
		}
	}
	oi := n.ownerInfo(m.From)
	if !ls.ready || m.From == "" || ownership.MayAccept(n.role, ls.kind, oi.relation(ls)) != nil || (ls.kind == ownership.Downstream && reservedType(m.Type)) {
		// Not the peer's to send (a world its link does not hold, or
		// before its metadata): dropped, like a write to an object it
		// does not own.
		n.life.metrics.Message("refused")
		n.log.Debug("refused message", "link", l.ID(), "from", m.From, "type", m.Type)
		return
	}
	if m.Type == TypeRefused && ls.kind == ownership.Upstream {
		n.correctLocked(m, ls)
	}
	n.postLocked(m, ls, oi)
}

// postLocked delivers m here and puts it in the shared log for the
// links. n.mu must be held.
func (n *Node) postLocked(m peer.AppMessage, from *linkState, oi ownerInfo) {
	n.life.metrics.Message("relayed")
	if n.forMeLocked(m) {
		for _, fn := range n.fan.subs.fns {
			fn(m)
		}
	}
	n.fan.msgAt = append(n.fan.msgAt, msgMark{at: len(n.fan.log), m: m, enc: peer.AppendAppMessage(nil, m), from: from, oi: oi})
	if n.opts.Tick == peer.Immediate {
		n.flushLocked()
		return
	}
	n.kickLocked()
}

// forMeLocked reports whether m is for this node's own world. n.mu must
// be held.
func (n *Node) forMeLocked(m peer.AppMessage) bool {
	switch {
	case m.From == n.id:
		return false
	case m.World != "":
		return m.World == n.id
	case m.Room != "":
		return n.inRoomLocked(m.Room)
	}
	return true
}

// takesMessages reports whether ls's peer takes ephemeral messages.
func takesMessages(ls *linkState) bool {
	if !ls.ready || ls.link == nil {
		return false
	}
	md, ok := ls.link.Metadata()
	return ok && md.Has(peer.FeatureMessages)
}

// sendMessageLocked sends ls the message of mm if it is for ls's peer.
// n.mu must be held.
func (n *Node) sendMessageLocked(ls *linkState, mm *msgMark) {
	m := &mm.m
	switch {
	case mm.from == ls,
		!ownership.MaySend(n.role, ls.kind, mm.oi.relation(ls)),
		m.World != "" && !n.towardLocked(ls, m.World),
		m.Room != "" && !ls.inRoom(m.Room),
		m.HasAt && ls.region != nil && ls.region.HasBoxes && !interest.Contains(ls.region.Boxes, m.At, n.opts.InterestMargin):
		return
	}
	if !ls.link.SendAppMessage(mm.enc) {
		n.life.metrics.Message("dropped")
	}
}

// towardLocked reports whether world lies beyond ls: behind it, or, for
// an upstream link, anywhere not behind this node. n.mu must be held.
func (n *Node) towardLocked(ls *linkState, world string) bool {
	c := n.hub.claims[world]
	if ls.kind == ownership.Upstream {
		return c == nil && world != n.id
	}
	return c == ls
}
