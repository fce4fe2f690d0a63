package enet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Options configures a Host. The zero value is usable.
type Options struct {
	// MaxPeers bounds the peers a listening host serves at once, half-open
	// connects included. Zero means 256; at most 4095.
	MaxPeers int
	// Channels is the channel count a dialing host asks for, and the most
	// a listening host grants. Zero means 1 for Dial and 255 for Listen.
	Channels int
	// MTU is the largest datagram sent. Zero means 1400.
	MTU int
	// MaxPacketSize bounds a packet reassembled from fragments. Zero means
	// 32 MiB, as the C library.
	MaxPacketSize int
	// MaxWaitingData bounds the bytes a peer may make this host hold:
	// fragments and packets received out of order, and delivered packets
	// not yet read. A peer over it is disconnected. Zero means 32 MiB.
	MaxWaitingData int
}

func (o *Options) defaults(listen bool) {
	if o.MaxPeers <= 0 {
		o.MaxPeers = 256
	}
	o.MaxPeers = min(o.MaxPeers, maxPeerID)
	if o.Channels <= 0 {
		o.Channels = 1
		if listen {
			o.Channels = maxChannelCount
		}
	}
	o.Channels = min(o.Channels, maxChannelCount)
	if o.MTU <= 0 {
		o.MTU = defaultMTU
	}
	o.MTU = max(min(o.MTU, maxMTU), minMTU)
	if o.MaxPacketSize <= 0 {
		o.MaxPacketSize = 32 << 20
	}
	if o.MaxWaitingData <= 0 {
		o.MaxWaitingData = 32 << 20
	}
}

type connKey struct {
	addr netip.AddrPort
	id   uint32
}

// ErrClosed is returned by a closed Host.
var ErrClosed = errors.New("enet: host closed")

// Host is one UDP socket serving ENet peers: a listening host accepts
// them, a dialing host has one. Its methods are safe for concurrent use.
type Host struct {
	conn   *net.UDPConn
	opts   Options
	listen bool
	start  time.Time

	mu    sync.Mutex
	peers []*Peer // by incoming peer id
	// byConnect finds a connection by its address and connect id: one
	// address may hold many (a host connects as many peers as it likes).
	byConnect map[connKey]*Peer
	accept    chan *Peer
	closed    bool
	out       []byte

	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

func newHost(conn *net.UDPConn, opts Options, listen bool) *Host {
	h := &Host{conn: conn, opts: opts, listen: listen, start: time.Now(), byConnect: map[connKey]*Peer{},
		accept: make(chan *Peer, opts.MaxPeers), wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.peers = make([]*Peer, opts.MaxPeers)
	h.wg.Add(2)
	go h.readLoop()
	go h.serviceLoop()
	return h
}

// Listen serves ENet peers on a UDP address.
func Listen(addr string, opts Options) (*Host, error) {
	opts.defaults(true)
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("enet: %w", err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("enet: %w", err)
	}
	return newHost(conn, opts, true), nil
}

// Dial connects to an ENet host and returns the connected peer. Closing
// the peer's Host closes the socket.
func Dial(ctx context.Context, addr string, opts Options) (*Peer, error) {
	opts.defaults(false)
	opts.MaxPeers = 1
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("enet: %w", err)
	}
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, fmt.Errorf("enet: %w", err)
	}
	h := newHost(conn, opts, false)
	h.mu.Lock()
	p := h.newPeerLocked(ua.AddrPort(), 0)
	var id [4]byte
	rand.Read(id[:])
	p.connectID = binary.BigEndian.Uint32(id[:])
	p.state = stateConnecting
	p.channels = newChannels(opts.Channels)
	p.outgoingPeerID = maxPeerID
	p.queueLocked(command{kind: cmdConnect, flags: flagAcknowledge, channel: 0xFF,
		outgoingPeerID: p.id, incomingSession: 0xFF, outgoingSession: 0xFF,
		mtu: uint32(opts.MTU), windowSize: maxWindowSize, channelCount: uint32(opts.Channels),
		throttleInterval: throttleInterval, throttleAcceleration: throttleAcceleration, throttleDeceleration: throttleDeceleration,
		connectID: p.connectID}, true)
	h.mu.Unlock()
	h.kick()
	select {
	case <-p.connected:
		return p, nil
	case <-p.done:
		h.Close()
		return nil, fmt.Errorf("enet: connecting to %s: %w", addr, p.Err())
	case <-ctx.Done():
		h.Close()
		return nil, fmt.Errorf("enet: connecting to %s: %w", addr, ctx.Err())
	}
}

// Addr returns the host's UDP address.
func (h *Host) Addr() net.Addr { return h.conn.LocalAddr() }

// Accept returns the next peer that completed its connection.
func (h *Host) Accept(ctx context.Context) (*Peer, error) {
	select {
	case p := <-h.accept:
		return p, nil
	case <-h.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close disconnects every peer at once and closes the socket.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, p := range h.peers {
		if p != nil && p.state == stateConnected {
			// One unreliable goodbye, as enet_peer_disconnect_now sends.
			h.sendLocked(p, []command{{kind: cmdDisconnect, flags: flagUnsequenced, channel: 0xFF}}, false)
		}
		if p != nil {
			p.closeLocked(ErrClosed)
		}
	}
	h.mu.Unlock()
	close(h.done)
	err := h.conn.Close()
	h.wg.Wait()
	return err
}

func (h *Host) kick() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// now returns the host's service time in milliseconds.
func (h *Host) now() uint32 { return uint32(time.Since(h.start).Milliseconds()) + 1 }

func (h *Host) newPeerLocked(addr netip.AddrPort, id int) *Peer {
	p := &Peer{h: h, addr: addr, id: uint16(id), incomingSession: 0xFF, outgoingSession: 0xFF,
		rtt: defaultRoundTripTime, mtu: uint32(h.opts.MTU), windowSize: maxWindowSize,
		connected: make(chan struct{}), done: make(chan struct{}), notify: make(chan struct{}, 1),
		lastReceive: h.now()}
	h.peers[id] = p
	return p
}

func (h *Host) freeSlotLocked() int {
	for i, p := range h.peers {
		if p == nil {
			return i
		}
	}
	return -1
}

func (h *Host) readLoop() {
	defer h.wg.Done()
	buf := make([]byte, maxMTU+1)
	for {
		n, addr, err := h.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n > maxMTU {
			continue
		}
		h.receive(addr, buf[:n])
	}
}

func (h *Host) serviceLoop() {
	defer h.wg.Done()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		case <-h.wake:
		}
		h.mu.Lock()
		now := h.now()
		for _, p := range h.peers {
			if p != nil {
				p.serviceLocked(now)
			}
		}
		h.mu.Unlock()
	}
}

// receive handles one datagram.
func (h *Host) receive(addr netip.AddrPort, d []byte) {
	hd, cmds, err := decode(d)
	if err != nil && len(cmds) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if hd.peerID == maxPeerID {
		// Only a connect comes without a peer id.
		for i := range cmds {
			if cmds[i].kind == cmdConnect && h.listen {
				h.handleConnectLocked(addr, d, &cmds[i])
			}
		}
		return
	}
	if int(hd.peerID) >= len(h.peers) {
		return
	}
	p := h.peers[hd.peerID]
	if p == nil || p.addr != addr || p.state == stateDisconnected {
		return
	}
	if p.outgoingPeerID < maxPeerID && hd.session != p.incomingSession {
		return
	}
	p.receiveLocked(hd, cmds)
	h.kick()
}

// handleConnectLocked serves a connect. A half-open peer gets its verify
// again only when its connect comes again, never on a timer, so a spoofed
// source cannot make the host send more than it received: a verify is
// smaller than a connect.
func (h *Host) handleConnectLocked(addr netip.AddrPort, d []byte, c *command) {
	if p := h.byConnect[connKey{addr, c.connectID}]; p != nil {
		// A connect again: its verify was lost.
		if p.state == stateAckConnect && p.verify != nil {
			h.sendLocked(p, []command{p.verify.c}, true)
		}
		return
	}
	if c.channelCount < 1 || c.channelCount > maxChannelCount {
		return
	}
	slot := h.freeSlotLocked()
	if slot < 0 {
		return // full: the connect times out on the other side
	}
	p := h.newPeerLocked(addr, slot)
	p.state = stateAckConnect
	p.connectID = c.connectID
	h.byConnect[connKey{addr, c.connectID}] = p
	p.outgoingPeerID = c.outgoingPeerID
	p.mtu = max(min(c.mtu, uint32(h.opts.MTU)), minMTU)
	p.windowSize = max(min(c.windowSize, maxWindowSize), minWindowSize)
	p.channels = newChannels(min(int(c.channelCount), h.opts.Channels))
	p.throttle = [3]uint32{c.throttleInterval, c.throttleAcceleration, c.throttleDeceleration}
	p.bandwidth = [2]uint32{c.incomingBandwidth, c.outgoingBandwidth}
	const mask = headerSessionMask >> headerSessionShift
	in := c.incomingSession
	if in == 0xFF {
		in = p.outgoingSession
	}
	in = (in + 1) & mask
	if in == p.outgoingSession {
		in = (in + 1) & mask
	}
	out := c.outgoingSession
	if out == 0xFF {
		out = p.incomingSession
	}
	out = (out + 1) & mask
	if out == p.incomingSession {
		out = (out + 1) & mask
	}
	p.outgoingSession, p.incomingSession = in, out
	p.verify = p.queueLocked(command{kind: cmdVerifyConnect, flags: flagAcknowledge, channel: 0xFF,
		outgoingPeerID: p.id, incomingSession: in, outgoingSession: out,
		mtu: p.mtu, windowSize: p.windowSize, channelCount: uint32(len(p.channels)),
		throttleInterval: c.throttleInterval, throttleAcceleration: c.throttleAcceleration,
		throttleDeceleration: c.throttleDeceleration, connectID: c.connectID}, true)
	p.flushLocked(h.now())
}

// sendLocked writes commands to p in datagrams of at most its MTU.
func (h *Host) sendLocked(p *Peer, cmds []command, withTime bool) {
	peerID := p.outgoingPeerID
	session := p.outgoingSession
	if peerID == maxPeerID {
		session = 0
	}
	start := func() {
		h.out = appendHeader(h.out[:0], peerID, session, withTime, uint16(h.now()))
	}
	start()
	hdr := len(h.out)
	for i := range cmds {
		if len(h.out) > hdr && len(h.out)+cmds[i].wireSize() > int(p.mtu) {
			h.conn.WriteToUDPAddrPort(h.out, p.addr) //nolint:errcheck // UDP: loss is expected
			start()
		}
		h.out = appendCommand(h.out, &cmds[i])
	}
	if len(h.out) > hdr {
		h.conn.WriteToUDPAddrPort(h.out, p.addr) //nolint:errcheck
	}
}

// CloseSocket closes the host's socket without a word to its peers, as a
// crashed process would; for tests of timeouts.
func (h *Host) CloseSocket() { h.conn.Close() }
