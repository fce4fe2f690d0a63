package enet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Wire constants of ENet 1.3 (enet/protocol.h). Every multi-byte field is
// big-endian.
const (
	cmdAcknowledge            = 1
	cmdConnect                = 2
	cmdVerifyConnect          = 3
	cmdDisconnect             = 4
	cmdPing                   = 5
	cmdSendReliable           = 6
	cmdSendUnreliable         = 7
	cmdSendFragment           = 8
	cmdSendUnsequenced        = 9
	cmdBandwidthLimit         = 10
	cmdThrottleConfigure      = 11
	cmdSendUnreliableFragment = 12
	cmdCount                  = 13
	cmdMask                   = 0x0F

	flagAcknowledge = 1 << 7
	flagUnsequenced = 1 << 6

	headerFlagCompressed = 1 << 14
	headerFlagSentTime   = 1 << 15
	headerSessionMask    = 3 << 12
	headerSessionShift   = 12

	maxPeerID        = 0xFFF
	minMTU           = 576
	maxMTU           = 4096
	minWindowSize    = 4096
	maxWindowSize    = 65536
	maxChannelCount  = 255
	maxFragmentCount = 1024 * 1024

	reliableWindowSize    = 0x1000
	reliableWindows       = 16
	freeReliableWindows   = 8
	unsequencedWindowSize = 1024

	defaultMTU                = 1400
	throttleInterval          = 5000
	throttleAcceleration      = 2
	throttleDeceleration      = 2
	defaultRoundTripTime      = 500
	pingInterval              = 500
	timeoutLimit              = 32
	timeoutMinimum            = 5000
	timeoutMaximum            = 30000
	commandHeaderSize         = 4
	protocolHeaderSize        = 4 // with sentTime
	protocolHeaderSizeNoTime  = 2
	sendFragmentHeaderSize    = 24
	sendReliableHeaderSize    = 6
	sendUnreliableHeaderSize  = 8
	sendUnsequencedHeaderSize = 8
)

// commandSizes are the fixed sizes of each command, data excluded.
var commandSizes = [cmdCount]int{
	0,  // none
	8,  // acknowledge
	48, // connect
	44, // verify connect
	8,  // disconnect
	4,  // ping
	6,  // send reliable
	8,  // send unreliable
	24, // send fragment
	8,  // send unsequenced
	12, // bandwidth limit
	16, // throttle configure
	24, // send unreliable fragment
}

// ErrMalformed is wrapped by the decoder's errors.
var ErrMalformed = errors.New("enet: malformed datagram")

// header is a datagram's protocol header.
type header struct {
	peerID   uint16 // without flags and session
	session  uint8
	hasTime  bool
	sentTime uint16
}

// command is one decoded command. Only the fields of its kind are set.
type command struct {
	kind    uint8 // cmd* without flags
	flags   uint8 // flagAcknowledge, flagUnsequenced
	channel uint8
	seq     uint16 // reliable sequence number

	// acknowledge
	ackSeq, ackTime uint16
	// connect, verify connect
	outgoingPeerID                         uint16
	incomingSession, outgoingSession       uint8
	mtu, windowSize, channelCount          uint32
	incomingBandwidth, outgoingBandwidth   uint32
	throttleInterval, throttleAcceleration uint32
	throttleDeceleration, connectID, data  uint32
	// send unreliable, unsequenced
	unreliableSeq, unsequencedGroup uint16
	// fragments
	startSeq                                          uint16
	fragmentCount, fragmentNumber, totalLength, frOff uint32
	payload                                           []byte
}

// decode parses a datagram: its header and its commands. The payloads
// alias p.
func decode(p []byte) (header, []command, error) {
	var h header
	if len(p) < protocolHeaderSizeNoTime {
		return h, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(p))
	}
	raw := binary.BigEndian.Uint16(p)
	if raw&headerFlagCompressed != 0 {
		return h, nil, fmt.Errorf("%w: compressed datagrams are not supported", ErrMalformed)
	}
	h.peerID = raw &^ (headerFlagCompressed | headerFlagSentTime | headerSessionMask)
	h.session = uint8((raw & headerSessionMask) >> headerSessionShift)
	off := protocolHeaderSizeNoTime
	if raw&headerFlagSentTime != 0 {
		if len(p) < protocolHeaderSize {
			return h, nil, fmt.Errorf("%w: short header", ErrMalformed)
		}
		h.hasTime, h.sentTime = true, binary.BigEndian.Uint16(p[2:])
		off = protocolHeaderSize
	}
	var cmds []command
	for off < len(p) {
		if len(p)-off < commandHeaderSize {
			return h, cmds, fmt.Errorf("%w: truncated command header", ErrMalformed)
		}
		c := command{kind: p[off] & cmdMask, flags: p[off] &^ cmdMask, channel: p[off+1], seq: binary.BigEndian.Uint16(p[off+2:])}
		if c.kind == 0 || c.kind >= cmdCount {
			return h, cmds, fmt.Errorf("%w: command %d", ErrMalformed, c.kind)
		}
		size := commandSizes[c.kind]
		if len(p)-off < size {
			return h, cmds, fmt.Errorf("%w: truncated command %d", ErrMalformed, c.kind)
		}
		b := p[off+commandHeaderSize : off+size]
		u16 := func(i int) uint16 { return binary.BigEndian.Uint16(b[i:]) }
		u32 := func(i int) uint32 { return binary.BigEndian.Uint32(b[i:]) }
		var dataLen int
		switch c.kind {
		case cmdAcknowledge:
			c.ackSeq, c.ackTime = u16(0), u16(2)
		case cmdConnect, cmdVerifyConnect:
			c.outgoingPeerID, c.incomingSession, c.outgoingSession = u16(0), b[2], b[3]
			c.mtu, c.windowSize, c.channelCount = u32(4), u32(8), u32(12)
			c.incomingBandwidth, c.outgoingBandwidth = u32(16), u32(20)
			c.throttleInterval, c.throttleAcceleration, c.throttleDeceleration = u32(24), u32(28), u32(32)
			c.connectID = u32(36)
			if c.kind == cmdConnect {
				c.data = u32(40)
			}
		case cmdDisconnect:
			c.data = u32(0)
		case cmdSendReliable:
			dataLen = int(u16(0))
		case cmdSendUnreliable:
			c.unreliableSeq, dataLen = u16(0), int(u16(2))
		case cmdSendUnsequenced:
			c.unsequencedGroup, dataLen = u16(0), int(u16(2))
		case cmdSendFragment, cmdSendUnreliableFragment:
			c.startSeq, dataLen = u16(0), int(u16(2))
			c.fragmentCount, c.fragmentNumber, c.totalLength, c.frOff = u32(4), u32(8), u32(12), u32(16)
		case cmdBandwidthLimit:
			c.incomingBandwidth, c.outgoingBandwidth = u32(0), u32(4)
		case cmdThrottleConfigure:
			c.throttleInterval, c.throttleAcceleration, c.throttleDeceleration = u32(0), u32(4), u32(8)
		}
		off += size
		if dataLen > len(p)-off {
			return h, cmds, fmt.Errorf("%w: data runs past the datagram", ErrMalformed)
		}
		if dataLen > 0 {
			c.payload = p[off : off+dataLen]
			off += dataLen
		}
		cmds = append(cmds, c)
	}
	return h, cmds, nil
}

// appendCommand appends c's wire form.
func appendCommand(b []byte, c *command) []byte {
	b = append(b, c.kind|c.flags, c.channel)
	b = binary.BigEndian.AppendUint16(b, c.seq)
	u16 := func(v uint16) { b = binary.BigEndian.AppendUint16(b, v) }
	u32 := func(v uint32) { b = binary.BigEndian.AppendUint32(b, v) }
	switch c.kind {
	case cmdAcknowledge:
		u16(c.ackSeq)
		u16(c.ackTime)
	case cmdConnect, cmdVerifyConnect:
		u16(c.outgoingPeerID)
		b = append(b, c.incomingSession, c.outgoingSession)
		for _, v := range []uint32{c.mtu, c.windowSize, c.channelCount, c.incomingBandwidth, c.outgoingBandwidth,
			c.throttleInterval, c.throttleAcceleration, c.throttleDeceleration, c.connectID} {
			u32(v)
		}
		if c.kind == cmdConnect {
			u32(c.data)
		}
	case cmdDisconnect:
		u32(c.data)
	case cmdSendReliable:
		u16(uint16(len(c.payload)))
	case cmdSendUnreliable:
		u16(c.unreliableSeq)
		u16(uint16(len(c.payload)))
	case cmdSendUnsequenced:
		u16(c.unsequencedGroup)
		u16(uint16(len(c.payload)))
	case cmdSendFragment, cmdSendUnreliableFragment:
		u16(c.startSeq)
		u16(uint16(len(c.payload)))
		u32(c.fragmentCount)
		u32(c.fragmentNumber)
		u32(c.totalLength)
		u32(c.frOff)
	case cmdBandwidthLimit:
		u32(c.incomingBandwidth)
		u32(c.outgoingBandwidth)
	case cmdThrottleConfigure:
		u32(c.throttleInterval)
		u32(c.throttleAcceleration)
		u32(c.throttleDeceleration)
	}
	return append(b, c.payload...)
}

// wireSize is the size of c on the wire.
func (c *command) wireSize() int { return commandSizes[c.kind] + len(c.payload) }

// appendHeader appends a datagram header.
func appendHeader(b []byte, peerID uint16, session uint8, withTime bool, sentTime uint16) []byte {
	v := peerID | uint16(session&3)<<headerSessionShift
	if withTime {
		v |= headerFlagSentTime
		b = binary.BigEndian.AppendUint16(b, v)
		return binary.BigEndian.AppendUint16(b, sentTime)
	}
	return binary.BigEndian.AppendUint16(b, v)
}
