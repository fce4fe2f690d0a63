package snapshot

import (
	"errors"
	"fmt"
	"math"

	"github.com/solipsism/mesh/peer"
)

// Message types: the first byte of every datagram.
const (
	msgConnect    = 1 // client: let me in (padded)
	msgSnapshot   = 2 // server: world state
	msgChallenge  = 3 // server: prove your address with this cookie
	msgResponse   = 4 // client: the cookie, echoed
	msgAccept     = 5 // server: you are in
	msgCommand    = 6 // client: acks, loaded types, updates of its objects
	msgDisconnect = 7 // either: goodbye, with a reason
)

// Version is the version of the snapshot wire this package speaks, said
// in every connect request. A change to what either side sends that a peer
// of the previous version would read differently (a field, its width or
// code, a packet's layout, a reason's meaning) is a new version; what a
// peer ignores (a new message type it never gets unasked, a reason it
// takes as "stop") is not. A server answers a connect of another version
// with a disconnect of reason ReasonOutdated carrying its own. Version 0
// is a client from before versions were said: it may speak any older
// wire, and is refused alike. Version 2 widened a command's update
// operation to 3 bits, for the elements operation (a scope's blocks);
// version 3 ends a command with the client's interest (a region, rooms),
// which decides the ghosts it is sent.
const Version = 3

// OldestVersion is the oldest version a server still serves: versions 1
// and 2 differ from 3 only in their commands (1: 2-bit operations, no
// elements; both: no interest, so every ghost is relevant), so clients
// built for them keep working.
const OldestVersion = 1

// opBitsOf is the width of a command's update operation in a version.
func opBitsOf(version uint16) int {
	if version < 2 {
		return 2
	}
	return opBits
}

// MaxPacket is the largest datagram either side sends or accepts.
const MaxPacket = 1200

// Disconnect reasons.
const (
	ReasonNormal       = 1
	ReasonTimeout      = 2
	ReasonHashMismatch = 3
	ReasonShutdown     = 4
	ReasonRefused      = 5
	// ReasonNoSession answers a command from an address the server has no
	// session for (it restarted, or timed the client out): connect again.
	ReasonNoSession = 6
	// ReasonOutdated answers a connect of another Version: the server's
	// version follows the reason, a little-endian uint16. Update the
	// client (or the node); connecting again does not help.
	ReasonOutdated = 7
)

// outdatedSize is the size of a ReasonOutdated disconnect.
const outdatedSize = 4

// connectSize is the size of a connect request: padded so that the
// challenge it brings back is never larger.
const (
	connectSize   = 64
	challengeSize = 1 + 4 + 16
)

// ErrBadPacket is wrapped by the decoders' errors.
var ErrBadPacket = errors.New("snapshot: bad packet")

// header is the snapshot header, as the seed lays it out.
type header struct {
	LocalTime  uint32 // server clock, ms
	ReturnTime uint32 // the client's LocalTime of its last command
	CommandAge uint32 // ms since that command arrived
	Seq        uint8
	Tick       uint32
	LastCmd    uint32 // tick of the newest command received
	CmdMask    uint32 // bit i: command LastCmd-1-i received
}

func (h header) write(w *Writer) {
	w.WriteBits(msgSnapshot, 8)
	w.WriteBits(h.LocalTime, 32)
	w.WriteBits(h.ReturnTime, 32)
	w.WriteBits(h.CommandAge, 32)
	w.WriteBits(uint32(h.Seq), 8)
	w.WriteBits(h.Tick, 32)
	w.WriteBits(h.LastCmd, 32)
	w.WriteBits(h.CmdMask, 32)
}

func readHeader(r *Reader) header {
	var h header
	h.LocalTime = r.ReadBits(32)
	h.ReturnTime = r.ReadBits(32)
	h.CommandAge = r.ReadBits(32)
	h.Seq = uint8(r.ReadBits(8))
	h.Tick = r.ReadBits(32)
	h.LastCmd = r.ReadBits(32)
	h.CmdMask = r.ReadBits(32)
	return h
}

// prefab is one entry of the type list: the type's GUID and hash.
type prefab struct {
	GUID [16]byte
	Hash uint32
}

// maxPrefabsPerPacket is how many types one snapshot announces.
const maxPrefabsPerPacket = 32

func writePrefabs(w *Writer, start int, list []prefab) {
	w.WriteBits(uint32(len(list)), 16)
	w.WriteBits(uint32(start), 16)
	for _, p := range list {
		for _, c := range p.GUID {
			w.WriteBits(uint32(c), 8)
		}
		w.WriteBits(p.Hash, 32)
	}
}

func readPrefabs(r *Reader) (start int, list []prefab, err error) {
	n := int(r.ReadBits(16))
	start = int(r.ReadBits(16))
	if n > maxPrefabsPerPacket {
		return 0, nil, fmt.Errorf("%w: %d prefabs in one packet", ErrBadPacket, n)
	}
	list = make([]prefab, n)
	for i := range list {
		for j := range list[i].GUID {
			list[i].GUID[j] = byte(r.ReadBits(8))
		}
		list[i].Hash = r.ReadBits(32)
	}
	return start, list, r.Err()
}

// base is what one side knows of a ghost in one snapshot: its field
// values, change mask and data size.
type base struct {
	vals []value
	mask uint32
	size uint32
}

// ghostCodec encodes and decodes ghost data against up to two baselines:
// b0 (the newest acknowledged snapshot holding the ghost) and b1 (the one
// before). Numeric lanes are predicted linearly from both when there are
// two, else taken from b0, and the difference is sent.
//
// A compact group's ghosts (compact set: each has a baseline and no
// buffers to send) carry neither a data size nor a buffer count, and
// their change mask and lanes use the compact code, where the usual
// "as predicted" costs a bit instead of two.
type ghostCodec struct {
	tick, t0, t1 uint32
	compact      bool
}

func (c ghostCodec) predict(b0, b1 int32) int32 {
	if c.t1 == 0 || c.t0 == 0 || c.t0 <= c.t1 {
		return b0
	}
	p := int64(b0) + (int64(b0)-int64(b1))*int64(c.tick-c.t0)/int64(c.t0-c.t1)
	return int32(max(min(p, 1<<31-1), -1<<31))
}

// encode writes a ghost's change mask and changed fields after its id; it
// returns the mask and the data size in bits. data is scratch space.
func (c ghostCodec) encode(w, data *Writer, t *GhostType, vals []value, b0, b1 *base, pieces []*bufPiece) (mask, size uint32) {
	data.Reset()
	for i, f := range t.Fields {
		var bv value
		if b0 != nil {
			bv = b0.vals[i]
		}
		if b0 != nil && vals[i].equal(bv) {
			continue
		}
		if b0 == nil && vals[i].equal(value{}) {
			continue
		}
		mask |= 1 << i
		n := f.lanes()
		if n == 0 {
			data.WriteBytes(vals[i].raw)
			continue
		}
		for l := range n {
			pred := bv.lanes[l]
			if b1 != nil && !(f.Kind == Quat && l == 0) {
				pred = c.predict(bv.lanes[l], b1.vals[i].lanes[l])
			}
			if c.compact {
				data.WriteCompactInt(vals[i].lanes[l] - pred)
			} else {
				data.WritePackedInt(vals[i].lanes[l] - pred)
			}
		}
	}
	size = uint32(data.Bits())
	var bmask, bsize uint32
	if b0 != nil {
		bmask, bsize = b0.mask, b0.size
	}
	if c.compact {
		w.WriteCompact(mask ^ bmask) // change mask; no data size, no buffers
		w.Append(data)
		return mask, size
	}
	w.WritePackedInt(int32(size - bsize)) // data size, against the baseline's
	w.WritePacked(uint32(len(pieces)))    // buffers: the scopes that follow the data
	w.WritePacked(mask ^ bmask)           // change mask, against the baseline's
	w.Append(data)
	for _, p := range pieces {
		p.write(w)
	}
	return mask, size
}

// decode reads what encode wrote.
func (c ghostCodec) decode(r *Reader, t *GhostType, b0, b1 *base) (vals []value, pieces []bufPiece, mask, size uint32, err error) {
	var bmask, bsize uint32
	if b0 != nil {
		bmask, bsize = b0.mask, b0.size
	}
	var nbuf uint32
	if c.compact {
		mask = r.ReadCompact() ^ bmask
	} else {
		size = uint32(r.ReadPackedInt()) + bsize
		if nbuf = r.ReadPacked(); nbuf > maxBufPieces {
			return nil, nil, 0, 0, fmt.Errorf("%w: %d buffers", ErrBadPacket, nbuf)
		}
		mask = r.ReadPacked() ^ bmask
	}
	if r.Err() != nil {
		return nil, nil, 0, 0, r.Err()
	}
	if mask>>len(t.Fields) != 0 || int64(size) > int64(r.Remaining()) {
		return nil, nil, 0, 0, fmt.Errorf("%w: change mask or data size out of range", ErrBadPacket)
	}
	start := r.Remaining()
	vals = make([]value, len(t.Fields))
	for i, f := range t.Fields {
		var bv value
		if b0 != nil {
			bv = b0.vals[i]
		}
		if mask&(1<<i) == 0 {
			vals[i] = bv
			continue
		}
		n := f.lanes()
		if n == 0 {
			max := MaxJSONBytes
			if f.Kind == String {
				max = MaxStringBytes
			}
			vals[i].raw = r.ReadBytes(max)
			continue
		}
		for l := range n {
			pred := bv.lanes[l]
			if b1 != nil && !(f.Kind == Quat && l == 0) {
				pred = c.predict(bv.lanes[l], b1.vals[i].lanes[l])
			}
			if c.compact {
				vals[i].lanes[l] = pred + r.ReadCompactInt()
			} else {
				vals[i].lanes[l] = pred + r.ReadPackedInt()
			}
		}
	}
	if r.Err() != nil {
		return nil, nil, 0, 0, r.Err()
	}
	if c.compact {
		size = uint32(start - r.Remaining()) // what its data took
	}
	if uint32(start-r.Remaining()) != size {
		return nil, nil, 0, 0, fmt.Errorf("%w: ghost data is %d bits, announced %d", ErrBadPacket, start-r.Remaining(), size)
	}
	for range nbuf {
		p, err := readPiece(r)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		pieces = append(pieces, p)
	}
	return vals, pieces, mask, size, nil
}

// command is a client's command packet.
type command struct {
	LocalTime  uint32 // client clock, ms
	ReturnTime uint32 // the server LocalTime of the newest snapshot
	Tick       uint32 // command tick, increasing
	AckTick    uint32 // newest snapshot tick received (0: none)
	AckMask    uint32 // bit i: snapshot AckTick-1-i received
	Loaded     uint16 // ghost types loaded, from the start of the list
	Digest     uint32 // digest of the loaded types' hashes
	Updates    []update
	// Interest, if not nil, is the client's interest, with its number
	// (version 3 on).
	Interest *interestOf
}

// Interest is what a client wants to be sent: the ghosts of objects
// inside one of its boxes (by their "position" property), and of no room
// but its rooms (by their "room" property). An object without a position
// is inside every region, one without a room in every room; no boxes
// means no region, no rooms no room filter; a client's own objects are
// always sent. The zero value wants everything.
type Interest struct {
	Boxes []peer.Box
	Rooms []string
}

// Bounds of one interest on the wire.
const (
	MaxInterestBoxes = 8
	MaxInterestRooms = 16
)

// interestOf is an interest section: the interest and its number, which a
// client raises with every change and repeats until acknowledged.
type interestOf struct {
	Seq uint32
	Interest
}

func (in *interestOf) write(w *Writer) {
	w.WriteBits(in.Seq, 32)
	w.WritePacked(uint32(len(in.Boxes)))
	for _, b := range in.Boxes {
		for _, v := range append(b.Min[:], b.Max[:]...) {
			w.WriteBits(math.Float32bits(float32(v)), 32)
		}
	}
	w.WritePacked(uint32(len(in.Rooms)))
	for _, r := range in.Rooms {
		w.WriteBytes([]byte(r))
	}
}

func readInterest(r *Reader) (*interestOf, error) {
	in := &interestOf{Seq: r.ReadBits(32)}
	n := r.ReadPacked()
	if n > MaxInterestBoxes {
		return nil, fmt.Errorf("%w: %d interest boxes", ErrBadPacket, n)
	}
	for range n {
		var v [6]float64
		for i := range v {
			v[i] = float64(math.Float32frombits(r.ReadBits(32)))
		}
		in.Boxes = append(in.Boxes, peer.Box{Min: [3]float64{v[0], v[1], v[2]}, Max: [3]float64{v[3], v[4], v[5]}})
	}
	n = r.ReadPacked()
	if n > MaxInterestRooms {
		return nil, fmt.Errorf("%w: %d interest rooms", ErrBadPacket, n)
	}
	for range n {
		in.Rooms = append(in.Rooms, string(r.ReadBytes(MaxStringBytes)))
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPacket, r.Err())
	}
	if err := checkInterest(in.Interest); err != nil { // what a client may send
		return nil, fmt.Errorf("%w: %v", ErrBadPacket, err)
	}
	return in, nil
}

// update is a change of an object the client owns, or a request for its
// ownership.
type update struct {
	ID    string
	Op    uint8  // opSet, opRemove, opTake, opRelease or opElements
	Props []byte // a JSON object, for a set; a scope delta, for elements
	// Seq numbers a take, release or elements: a client repeats one until
	// it is acknowledged, and the server carries out each number once.
	Seq uint32
	// Scope names the scope of an elements update.
	Scope string
}

// Update operations, three bits on the wire.
const (
	opSet      = 0 // create or change the object: Props follow
	opRemove   = 1 // remove it
	opTake     = 2 // ask for its ownership (the node's transfer policy decides)
	opRelease  = 3 // give it to the node
	opElements = 4 // change elements of one of its scopes: Seq, Scope and a delta follow
	opBits     = 3
)

// numbered reports whether an update carries a request number: the
// server carries each out once, however often it is repeated.
func (u update) numbered() bool {
	return u.Op == opTake || u.Op == opRelease || u.Op == opElements
}

// maxUpdates bounds one command's updates.
const maxUpdates = 256

func (c *command) write(w *Writer) { c.writeVersion(w, Version) }

// writeVersion writes a command as a client of that version does.
func (c *command) writeVersion(w *Writer, version uint16) {
	w.WriteBits(msgCommand, 8)
	w.WriteBits(c.LocalTime, 32)
	w.WriteBits(c.ReturnTime, 32)
	w.WriteBits(c.Tick, 32)
	w.WriteBits(c.AckTick, 32)
	w.WriteBits(c.AckMask, 32)
	w.WriteBits(uint32(c.Loaded), 16)
	w.WriteBits(c.Digest, 32)
	w.WritePacked(uint32(len(c.Updates)))
	for _, u := range c.Updates {
		w.WriteBits(uint32(u.Op), opBitsOf(version))
		w.WriteBytes([]byte(u.ID))
		switch u.Op {
		case opSet:
			w.WriteBytes(u.Props)
		case opTake, opRelease:
			w.WriteBits(u.Seq, 32)
		case opElements:
			w.WriteBits(u.Seq, 32)
			w.WriteBytes([]byte(u.Scope))
			w.WriteBytes(u.Props)
		}
	}
	if version >= 3 {
		w.WriteBool(c.Interest != nil)
		if c.Interest != nil {
			c.Interest.write(w)
		}
	}
}

// decodeCommand decodes a command packet of this Version, type byte
// included.
func decodeCommand(p []byte) (command, error) { return decodeCommandVersion(p, Version) }

// decodeCommandVersion decodes a command packet of a client of that
// version.
func decodeCommandVersion(p []byte, version uint16) (command, error) {
	r := NewReader(p)
	if r.ReadBits(8) != msgCommand {
		return command{}, fmt.Errorf("%w: not a command", ErrBadPacket)
	}
	var c command
	c.LocalTime = r.ReadBits(32)
	c.ReturnTime = r.ReadBits(32)
	c.Tick = r.ReadBits(32)
	c.AckTick = r.ReadBits(32)
	c.AckMask = r.ReadBits(32)
	c.Loaded = uint16(r.ReadBits(16))
	c.Digest = r.ReadBits(32)
	n := r.ReadPacked()
	if n > maxUpdates {
		return command{}, fmt.Errorf("%w: %d updates", ErrBadPacket, n)
	}
	for range n {
		var u update
		u.Op = uint8(r.ReadBits(opBitsOf(version)))
		u.ID = string(r.ReadBytes(MaxJSONBytes))
		switch u.Op {
		case opSet:
			u.Props = r.ReadBytes(MaxPacket)
		case opTake, opRelease:
			u.Seq = r.ReadBits(32)
		case opElements:
			u.Seq = r.ReadBits(32)
			u.Scope = string(r.ReadBytes(MaxStringBytes))
			u.Props = r.ReadBytes(MaxPacket)
		case opRemove:
		default:
			return command{}, fmt.Errorf("%w: update operation %d", ErrBadPacket, u.Op)
		}
		if r.Err() != nil {
			break
		}
		c.Updates = append(c.Updates, u)
	}
	if version >= 3 && r.Err() == nil && r.ReadBool() {
		in, err := readInterest(r)
		if err != nil {
			return command{}, err
		}
		c.Interest = in
	}
	if r.Err() != nil {
		return command{}, fmt.Errorf("%w: %v", ErrBadPacket, r.Err())
	}
	return c, nil
}

// digest folds type hashes, in order, into one value.
func digest(hashes []uint32) uint32 {
	d := uint32(2166136261)
	for _, h := range hashes {
		d = (d ^ h) * 16777619
	}
	return d
}
