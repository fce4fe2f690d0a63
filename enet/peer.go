package enet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

type peerState uint8

const (
	stateConnecting    peerState = iota + 1 // we sent a connect
	stateAckConnect                         // we answered a connect; its peer has not acknowledged
	stateConnected                          // both ways
	stateDisconnecting                      // we sent a disconnect
	stateDisconnected
)

// Flags choose how Send delivers a packet.
type Flags uint8

const (
	// Reliable packets arrive once and in order on their channel,
	// retransmitted until acknowledged.
	Reliable Flags = 1 << iota
	// Unsequenced packets may arrive in any order (never twice).
	Unsequenced
)

// Packet is a packet received from a peer.
type Packet struct {
	Channel uint8
	Data    []byte
}

// ErrDisconnected is wrapped by the error of a peer that disconnected.
var ErrDisconnected = errors.New("enet: peer disconnected")

// ErrTimeout is the error of a peer that stopped acknowledging.
var ErrTimeout = errors.New("enet: peer timed out")

// Peer is one connection. Its methods are safe for concurrent use.
type Peer struct {
	h                                *Host
	addr                             netip.AddrPort
	id                               uint16 // our peer id (the other side's outgoing one)
	outgoingPeerID                   uint16
	incomingSession, outgoingSession uint8
	connectID                        uint32
	state                            peerState
	mtu, windowSize                  uint32
	channels                         []*channel
	throttle                         [3]uint32
	bandwidth                        [2]uint32

	sysSeq   uint16 // reliable sequence of channel 0xFF (connect, verify, disconnect, ping)
	queue    []*outCmd
	sent     []*outCmd
	acks     []command
	verify   *outCmd
	inFlight int

	rtt, rttVar           uint32 // ms
	lastReceive, lastSend uint32
	// earliestTimeout is when the first command that timed out since the
	// last acknowledgement was sent (0: none), as the C library keeps it:
	// a peer times out when nothing it was sent has been acknowledged for
	// long, not when one command was unlucky on a link that is alive.
	earliestTimeout uint32
	unseqGroup      uint16
	inUnseqGroup    uint16
	unseqWindow     [unsequencedWindowSize / 32]uint32
	waiting         int // bytes held for this peer

	inbox     []Packet
	notify    chan struct{}
	connected chan struct{}
	done      chan struct{}
	err       error
	// DisconnectData is the data of the peer's disconnect, if it sent one.
	disconnectData uint32
}

type outCmd struct {
	c         command
	reliable  bool
	sentAt    uint32 // 0: not sent yet
	firstSent uint32
	rto       uint32
	attempts  int
}

type channel struct {
	outReliable, outUnreliable uint16
	inReliable, inUnreliable   uint16
	pending                    map[uint16]*command
	frag                       *reassembly
	ufrags                     map[[2]uint16]*reassembly
}

type reassembly struct {
	start      uint16
	data       []byte
	count, got uint32
	have       map[uint32]bool
}

func newChannels(n int) []*channel {
	cs := make([]*channel, n)
	for i := range cs {
		cs[i] = &channel{}
	}
	return cs
}

// RemoteAddr returns the peer's address.
func (p *Peer) RemoteAddr() string { return p.addr.String() }

// Host returns the host the peer belongs to.
func (p *Peer) Host() *Host { return p.h }

// RTT returns the smoothed round-trip time.
func (p *Peer) RTT() time.Duration {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return time.Duration(p.rtt) * time.Millisecond
}

// Done is closed when the peer is gone; Err says why.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err returns why the peer is gone, or nil.
func (p *Peer) Err() error {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return p.err
}

// Channels returns the number of channels of the connection.
func (p *Peer) Channels() int {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return len(p.channels)
}

// MaxUnfragmented returns the largest packet sent in one datagram; a
// larger one goes in fragments, and an unreliable one is lost whole when
// any of its fragments is.
func (p *Peer) MaxUnfragmented() int {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return int(p.mtu) - protocolHeaderSize - sendFragmentHeaderSize
}

// Unacknowledged returns the number of reliable commands (packets, or
// fragments of one) of a channel queued or sent and not yet acknowledged.
func (p *Peer) Unacknowledged(ch uint8) int {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	n := 0
	for _, list := range [][]*outCmd{p.queue, p.sent} {
		for _, oc := range list {
			if oc.reliable && oc.c.channel == ch {
				n++
			}
		}
	}
	return n
}

// Send queues a packet on a channel. Packets larger than one datagram
// are fragmented.
func (p *Peer) Send(ch uint8, data []byte, flags Flags) error {
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.state != stateConnected {
		if p.err != nil {
			return p.err
		}
		return errors.New("enet: peer not connected")
	}
	if int(ch) >= len(p.channels) {
		return fmt.Errorf("enet: channel %d of %d", ch, len(p.channels))
	}
	if len(data) > h.opts.MaxPacketSize {
		return fmt.Errorf("enet: packet of %d bytes over the limit of %d", len(data), h.opts.MaxPacketSize)
	}
	c := p.channels[ch]
	data = append([]byte(nil), data...)
	fragLen := int(p.mtu) - protocolHeaderSize - sendFragmentHeaderSize
	reliable := flags&Reliable != 0
	if !reliable && len(data) > fragLen && c.outUnreliable == 0xFFFF {
		reliable = true
	}
	switch {
	case len(data) > fragLen:
		count := uint32((len(data) + fragLen - 1) / fragLen)
		kind, fl := uint8(cmdSendUnreliableFragment), uint8(0)
		var start uint16
		if reliable {
			kind, fl, start = cmdSendFragment, flagAcknowledge, c.outReliable+1
		} else {
			c.outUnreliable++
			start = c.outUnreliable
		}
		for i := uint32(0); i < count; i++ {
			off := int(i) * fragLen
			cmd := command{kind: kind, flags: fl, channel: ch, startSeq: start, fragmentCount: count, fragmentNumber: i,
				totalLength: uint32(len(data)), frOff: uint32(off), payload: data[off:min(off+fragLen, len(data))]}
			if reliable {
				c.outReliable++
				cmd.seq = c.outReliable
			} else {
				cmd.seq = c.outReliable
			}
			p.queueLocked(cmd, reliable)
		}
		if reliable {
			c.outUnreliable = 0
		}
	case reliable:
		c.outReliable++
		c.outUnreliable = 0
		p.queueLocked(command{kind: cmdSendReliable, flags: flagAcknowledge, channel: ch, seq: c.outReliable, payload: data}, true)
	case flags&Unsequenced != 0:
		p.unseqGroup++
		p.queueLocked(command{kind: cmdSendUnsequenced, flags: flagUnsequenced, channel: ch, unsequencedGroup: p.unseqGroup, payload: data}, false)
	default:
		c.outUnreliable++
		p.queueLocked(command{kind: cmdSendUnreliable, channel: ch, seq: c.outReliable, unreliableSeq: c.outUnreliable, payload: data}, false)
	}
	h.kick()
	return nil
}

// Receive returns the next packet from the peer.
func (p *Peer) Receive(ctx context.Context) (Packet, error) {
	for {
		p.h.mu.Lock()
		if len(p.inbox) > 0 {
			pk := p.inbox[0]
			p.inbox[0] = Packet{}
			p.inbox = p.inbox[1:]
			p.waiting -= len(pk.Data)
			p.h.mu.Unlock()
			return pk, nil
		}
		err := p.err
		p.h.mu.Unlock()
		if err != nil {
			return Packet{}, err
		}
		select {
		case <-p.notify:
		case <-p.done:
		case <-ctx.Done():
			return Packet{}, ctx.Err()
		}
	}
}

// Disconnect asks the peer to disconnect and waits until it acknowledged,
// ctx ended, or the peer timed out. data travels with the request.
func (p *Peer) Disconnect(ctx context.Context, data uint32) error {
	h := p.h
	h.mu.Lock()
	if p.state == stateConnected {
		p.state = stateDisconnecting
		p.sysSeq++
		p.queueLocked(command{kind: cmdDisconnect, flags: flagAcknowledge, channel: 0xFF, seq: p.sysSeq, data: data}, true)
		h.kick()
	} else if p.state != stateDisconnecting {
		p.closeLocked(fmt.Errorf("%w (by us)", ErrDisconnected))
	}
	h.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		h.mu.Lock()
		p.closeLocked(fmt.Errorf("%w (by us)", ErrDisconnected))
		h.mu.Unlock()
	}
	if !h.listen {
		h.Close()
	}
	return nil
}

// DisconnectLater is Disconnect once every reliable packet queued before
// it has been acknowledged (the C library's enet_peer_disconnect_later):
// a refusal sent just before reaches the peer, where a disconnect at once
// would overtake it. It waits at most until ctx ends for them, then
// disconnects anyway.
func (p *Peer) DisconnectLater(ctx context.Context, data uint32) error {
	for {
		p.h.mu.Lock()
		pending := false
		for _, list := range [][]*outCmd{p.queue, p.sent} {
			for _, oc := range list {
				pending = pending || oc.reliable && oc.c.channel != 0xFF
			}
		}
		p.h.mu.Unlock()
		if !pending {
			break
		}
		select {
		case <-p.done:
			return nil
		case <-ctx.Done():
			return p.Disconnect(context.Background(), data)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return p.Disconnect(ctx, data)
}

// queueLocked queues a command; reliable ones are retransmitted until
// acknowledged. Commands of channel 0xFF other than verify get the peer's
// system sequence. h.mu must be held.
func (p *Peer) queueLocked(c command, reliable bool) *outCmd {
	if c.channel == 0xFF && c.kind == cmdConnect {
		p.sysSeq++
		c.seq = p.sysSeq
	}
	if c.channel == 0xFF && c.kind == cmdVerifyConnect {
		p.sysSeq++
		c.seq = p.sysSeq
	}
	oc := &outCmd{c: c, reliable: reliable}
	p.queue = append(p.queue, oc)
	return oc
}

// closeLocked ends the peer. h.mu must be held.
func (p *Peer) closeLocked(err error) {
	if p.state == stateDisconnected {
		return
	}
	p.state = stateDisconnected
	p.err = err
	close(p.done)
	h := p.h
	if int(p.id) < len(h.peers) && h.peers[p.id] == p {
		h.peers[p.id] = nil
	}
	if k := (connKey{p.addr, p.connectID}); h.byConnect[k] == p {
		delete(h.byConnect, k)
	}
	p.queue, p.sent, p.acks = nil, nil, nil
	for _, c := range p.channels {
		c.pending, c.frag, c.ufrags = nil, nil, nil
	}
}

// deliverLocked hands a packet to the reader.
func (p *Peer) deliverLocked(ch uint8, data []byte) {
	p.waiting += len(data)
	if p.waiting > p.h.opts.MaxWaitingData {
		p.closeLocked(fmt.Errorf("enet: peer %s holds more than %d bytes unread", p.RemoteAddr(), p.h.opts.MaxWaitingData))
		return
	}
	p.inbox = append(p.inbox, Packet{Channel: ch, Data: data})
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// receiveLocked handles a datagram's commands. h.mu must be held.
func (p *Peer) receiveLocked(hd header, cmds []command) {
	h := p.h
	now := h.now()
	p.lastReceive = now
	for i := range cmds {
		c := &cmds[i]
		if p.state == stateDisconnected {
			return
		}
		ack := c.flags&flagAcknowledge != 0 && hd.hasTime
		switch c.kind {
		case cmdAcknowledge:
			p.handleAckLocked(c, now)
			continue
		case cmdVerifyConnect:
			if p.state != stateConnecting || c.connectID != p.connectID || c.channelCount < 1 {
				continue
			}
			p.removeSentLocked(0xFF, 1)
			p.outgoingPeerID = c.outgoingPeerID
			p.incomingSession, p.outgoingSession = c.incomingSession, c.outgoingSession
			p.mtu = max(min(p.mtu, c.mtu), minMTU)
			p.windowSize = max(min(p.windowSize, c.windowSize), minWindowSize)
			if int(c.channelCount) < len(p.channels) {
				p.channels = p.channels[:c.channelCount]
			}
			p.state = stateConnected
			close(p.connected)
		case cmdConnect:
			continue
		case cmdDisconnect:
			if ack {
				p.acks = append(p.acks, command{kind: cmdAcknowledge, channel: c.channel, seq: c.seq, ackSeq: c.seq, ackTime: hd.sentTime})
			}
			p.disconnectData = c.data
			p.flushAcksLocked()
			p.closeLocked(fmt.Errorf("%w (data %d)", ErrDisconnected, c.data))
			return
		case cmdPing:
		case cmdBandwidthLimit:
			p.bandwidth = [2]uint32{c.incomingBandwidth, c.outgoingBandwidth}
		case cmdThrottleConfigure:
			p.throttle = [3]uint32{c.throttleInterval, c.throttleAcceleration, c.throttleDeceleration}
		default:
			if p.state != stateConnected && p.state != stateDisconnecting || int(c.channel) >= len(p.channels) {
				return // as the C library: data before the connection is complete ends the datagram
			}
			if !p.handleDataLocked(c) {
				continue // not acknowledged: it comes again
			}
		}
		if ack {
			p.acks = append(p.acks, command{kind: cmdAcknowledge, channel: c.channel, seq: c.seq, ackSeq: c.seq, ackTime: hd.sentTime})
		}
	}
}

// handleDataLocked takes a data command; false means it was refused
// (outside the window or over the memory bound) and must not be
// acknowledged.
func (p *Peer) handleDataLocked(c *command) bool {
	ch := p.channels[c.channel]
	switch c.kind {
	case cmdSendReliable, cmdSendFragment:
		d := c.seq - ch.inReliable
		if d == 0 || d >= 0x8000 {
			return true // a duplicate: acknowledge it again
		}
		if d > reliableWindowSize*(freeReliableWindows-1) {
			return false
		}
		if d != 1 {
			if ch.pending == nil {
				ch.pending = map[uint16]*command{}
			}
			if _, dup := ch.pending[c.seq]; !dup {
				if len(ch.pending) >= reliableWindowSize || p.waiting+len(c.payload) > p.h.opts.MaxWaitingData {
					return false
				}
				cc := *c
				cc.payload = append([]byte(nil), c.payload...)
				ch.pending[c.seq] = &cc
				p.waiting += len(cc.payload)
			}
			return true
		}
		p.deliverReliableLocked(c.channel, c)
		for p.state != stateDisconnected {
			next, ok := ch.pending[ch.inReliable+1]
			if !ok {
				break
			}
			delete(ch.pending, ch.inReliable+1)
			p.waiting -= len(next.payload)
			p.deliverReliableLocked(c.channel, next)
		}
		return true
	case cmdSendUnreliable:
		if c.seq != ch.inReliable || int16(c.unreliableSeq-ch.inUnreliable) <= 0 {
			return true
		}
		ch.inUnreliable = c.unreliableSeq
		p.deliverLocked(c.channel, append([]byte(nil), c.payload...))
		return true
	case cmdSendUnsequenced:
		return p.handleUnsequencedLocked(c)
	case cmdSendUnreliableFragment:
		if c.seq != ch.inReliable || int16(c.startSeq-ch.inUnreliable) <= 0 {
			return true
		}
		key := [2]uint16{c.seq, c.startSeq}
		if ch.ufrags == nil {
			ch.ufrags = map[[2]uint16]*reassembly{}
		}
		r := ch.ufrags[key]
		if r == nil {
			if len(ch.ufrags) >= 4 {
				// Keep a few partial packets: an older one will not
				// be delivered anyway.
				for k, old := range ch.ufrags {
					p.waiting -= len(old.data)
					delete(ch.ufrags, k)
					break
				}
			}
			if r = p.newReassemblyLocked(c); r == nil {
				return true
			}
			ch.ufrags[key] = r
		}
		if done := p.addFragmentLocked(r, c); done {
			delete(ch.ufrags, key)
			p.waiting -= len(r.data)
			if int16(c.startSeq-ch.inUnreliable) > 0 {
				ch.inUnreliable = c.startSeq
				p.deliverLocked(c.channel, r.data)
			}
		}
		return true
	}
	return true
}

func (p *Peer) handleUnsequencedLocked(c *command) bool {
	group := uint32(c.unsequencedGroup)
	index := group % unsequencedWindowSize
	if group < uint32(p.inUnseqGroup) {
		group += 0x10000
	}
	if group >= uint32(p.inUnseqGroup)+32*unsequencedWindowSize {
		return true
	}
	group &= 0xFFFF
	if uint16(group-index) != p.inUnseqGroup {
		p.inUnseqGroup = uint16(group - index)
		clear(p.unseqWindow[:])
	} else if p.unseqWindow[index/32]&(1<<(index%32)) != 0 {
		return true
	}
	p.unseqWindow[index/32] |= 1 << (index % 32)
	p.deliverLocked(c.channel, append([]byte(nil), c.payload...))
	return true
}

// newReassemblyLocked starts collecting a fragmented packet, or refuses
// one that is too large or inconsistent.
func (p *Peer) newReassemblyLocked(c *command) *reassembly {
	if c.fragmentCount == 0 || c.fragmentCount > maxFragmentCount || c.totalLength == 0 ||
		int64(c.totalLength) > int64(p.h.opts.MaxPacketSize) || uint64(c.fragmentCount) > uint64(c.totalLength) ||
		p.waiting+int(c.totalLength) > p.h.opts.MaxWaitingData {
		return nil
	}
	p.waiting += int(c.totalLength)
	return &reassembly{start: c.startSeq, data: make([]byte, c.totalLength), count: c.fragmentCount, have: map[uint32]bool{}}
}

// addFragmentLocked adds a fragment; it reports whether the packet is
// complete.
func (p *Peer) addFragmentLocked(r *reassembly, c *command) bool {
	if c.fragmentCount != r.count || c.fragmentNumber >= r.count || r.have[c.fragmentNumber] ||
		uint64(c.frOff)+uint64(len(c.payload)) > uint64(len(r.data)) {
		return false
	}
	r.have[c.fragmentNumber] = true
	copy(r.data[c.frOff:], c.payload)
	r.got++
	return r.got == r.count
}

// deliverReliableLocked delivers the next reliable command of a channel:
// a packet, or a fragment of one.
func (p *Peer) deliverReliableLocked(ch uint8, c *command) {
	chn := p.channels[ch]
	chn.inReliable = c.seq
	chn.inUnreliable = 0
	if c.kind == cmdSendReliable {
		p.deliverLocked(ch, append([]byte(nil), c.payload...))
		return
	}
	if chn.frag == nil || chn.frag.start != c.startSeq {
		if chn.frag != nil {
			p.waiting -= len(chn.frag.data)
		}
		if chn.frag = p.newReassemblyLocked(c); chn.frag == nil {
			p.closeLocked(fmt.Errorf("enet: peer %s sent a fragment that cannot be reassembled", p.RemoteAddr()))
			return
		}
	}
	if p.addFragmentLocked(chn.frag, c) {
		r := chn.frag
		chn.frag = nil
		p.waiting -= len(r.data)
		p.deliverLocked(ch, r.data)
	}
}

// handleAckLocked removes the acknowledged command and updates the RTT.
func (p *Peer) handleAckLocked(c *command, now uint32) {
	sent := uint32(c.ackTime) | now&0xFFFF0000
	if sent&0x8000 > now&0x8000 {
		sent -= 0x10000
	}
	if now >= sent {
		rtt := now - sent
		if p.rttVar > 0 || p.rtt != defaultRoundTripTime {
			p.rttVar -= p.rttVar / 4
			if rtt >= p.rtt {
				d := rtt - p.rtt
				p.rttVar += d / 4
				p.rtt += d / 8
			} else {
				d := p.rtt - rtt
				p.rttVar += d / 4
				p.rtt -= d / 8
			}
		} else {
			p.rtt, p.rttVar = max(rtt, 1), max(rtt/2, 1)
		}
	}
	p.earliestTimeout = 0 // any acknowledgement shows the peer alive
	oc := p.removeSentLocked(c.channel, c.ackSeq)
	if oc == nil {
		return
	}
	switch {
	case oc.c.kind == cmdVerifyConnect && p.state == stateAckConnect:
		p.state = stateConnected
		p.verify = nil
		close(p.connected)
		select {
		case p.h.accept <- p:
		default:
			p.closeLocked(errors.New("enet: accept queue full"))
		}
	case oc.c.kind == cmdDisconnect && p.state == stateDisconnecting:
		p.closeLocked(fmt.Errorf("%w (by us)", ErrDisconnected))
	}
}

func (p *Peer) removeSentLocked(ch uint8, seq uint16) *outCmd {
	for i, oc := range p.sent {
		if oc.c.channel == ch && oc.c.seq == seq {
			p.sent = append(p.sent[:i:i], p.sent[i+1:]...)
			p.inFlight -= oc.c.wireSize()
			return oc
		}
	}
	// Not sent yet (a verify acknowledged from a queue it never left).
	for i, oc := range p.queue {
		if oc.reliable && oc.c.channel == ch && oc.c.seq == seq && oc.sentAt != 0 {
			p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
			return oc
		}
	}
	return nil
}

// serviceLocked retransmits, pings, times out and flushes. h.mu must be
// held.
func (p *Peer) serviceLocked(now uint32) {
	switch p.state {
	case stateDisconnected:
		return
	case stateAckConnect:
		// Half-open: nothing is retransmitted (see handleConnectLocked),
		// and it is forgotten after the minimum timeout.
		if now-p.lastReceive > timeoutMinimum {
			p.closeLocked(ErrTimeout)
		}
		return
	}
	var resend []*outCmd
	keep := p.sent[:0]
	for _, oc := range p.sent {
		if now-oc.sentAt < oc.rto {
			keep = append(keep, oc)
			continue
		}
		if p.earliestTimeout == 0 || int32(oc.sentAt-p.earliestTimeout) < 0 {
			p.earliestTimeout = oc.sentAt
		}
		if quiet := now - p.earliestTimeout; quiet >= timeoutMaximum || (1<<(oc.attempts-1) >= timeoutLimit && quiet >= timeoutMinimum) {
			p.closeLocked(fmt.Errorf("%w: nothing acknowledged for %d ms; command %d (channel %d, sequence %d) sent %d times in %d ms (rtt %d ms)",
				ErrTimeout, quiet, oc.c.kind, oc.c.channel, oc.c.seq, oc.attempts, now-oc.firstSent, p.rtt))
			return
		}
		p.inFlight -= oc.c.wireSize()
		oc.rto *= 2
		resend = append(resend, oc)
	}
	p.sent = keep
	if len(resend) > 0 {
		p.queue = append(resend, p.queue...)
	}
	if p.state == stateConnected && len(p.sent) == 0 && now-p.lastReceive >= pingInterval {
		// As the C library: a peer not heard from is pinged, so that a
		// silent one times out even while it is sent unreliable data.
		p.sysSeq++
		p.queueLocked(command{kind: cmdPing, flags: flagAcknowledge, channel: 0xFF, seq: p.sysSeq}, true)
	}
	p.flushLocked(now)
}

// flushLocked sends acknowledgements and queued commands, reliable ones
// within the peer's window.
func (p *Peer) flushLocked(now uint32) {
	var out []command
	out = append(out, p.acks...)
	p.acks = p.acks[:0]
	withTime := false
	rest := p.queue[:0]
	for _, oc := range p.queue {
		if oc.reliable && p.inFlight > 0 && p.inFlight+oc.c.wireSize() > int(p.windowSize) {
			rest = append(rest, oc)
			continue
		}
		out = append(out, oc.c)
		if !oc.reliable {
			continue
		}
		withTime = true
		if oc.firstSent == 0 {
			oc.firstSent = now
			oc.rto = max(p.rtt+4*p.rttVar, 20)
		}
		oc.sentAt = now
		oc.attempts++
		p.inFlight += oc.c.wireSize()
		p.sent = append(p.sent, oc)
	}
	p.queue = rest
	if len(out) == 0 {
		return
	}
	p.lastSend = now
	p.h.sendLocked(p, out, withTime)
}

// flushAcksLocked sends pending acknowledgements at once.
func (p *Peer) flushAcksLocked() {
	if len(p.acks) > 0 {
		p.h.sendLocked(p, p.acks, false)
		p.acks = p.acks[:0]
	}
}

// LimitBandwidth tells the peer this side's bandwidth limits in bytes per
// second (0: unlimited), as enet_host_bandwidth_limit does.
func (p *Peer) LimitBandwidth(incoming, outgoing uint32) error {
	return p.system(command{kind: cmdBandwidthLimit, flags: flagAcknowledge, channel: 0xFF, incomingBandwidth: incoming, outgoingBandwidth: outgoing})
}

// ConfigureThrottle sends the peer packet-throttle parameters, as
// enet_peer_throttle_configure does (interval in ms).
func (p *Peer) ConfigureThrottle(interval, acceleration, deceleration uint32) error {
	return p.system(command{kind: cmdThrottleConfigure, flags: flagAcknowledge, channel: 0xFF,
		throttleInterval: interval, throttleAcceleration: acceleration, throttleDeceleration: deceleration})
}

// Limits returns what the peer last told of its bandwidth limits and
// throttle parameters.
func (p *Peer) Limits() (incoming, outgoing, interval, acceleration, deceleration uint32) {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return p.bandwidth[0], p.bandwidth[1], p.throttle[0], p.throttle[1], p.throttle[2]
}

func (p *Peer) system(c command) error {
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.state != stateConnected {
		return errors.New("enet: peer not connected")
	}
	p.sysSeq++
	c.seq = p.sysSeq
	p.queueLocked(c, true)
	h.kick()
	return nil
}
