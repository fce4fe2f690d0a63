package snapshot

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// Errors a Client ends with.
var (
	ErrHashMismatch = errors.New("snapshot: a ghost type's hash differs from ours")
	ErrDisconnected = errors.New("snapshot: disconnected by the server")
	ErrTimeout      = errors.New("snapshot: server silent")
	errStale        = errors.New("snapshot: older than the newest applied")
)

// OutdatedError is a connect refused because the server speaks another
// version of the snapshot wire (ReasonOutdated): one side must be
// updated. It is ErrDisconnected too.
type OutdatedError struct {
	// Server is the version the server speaks; this client speaks
	// Version.
	Server uint16
}

func (e *OutdatedError) Error() string {
	return fmt.Sprintf("snapshot: the server speaks wire version %d, this client %d: update the client or the node", e.Server, Version)
}

// Is makes an OutdatedError match ErrDisconnected.
func (e *OutdatedError) Is(target error) bool { return target == ErrDisconnected }

// world is a client's reconstruction of the server's world from
// snapshots. It does no I/O.
type world struct {
	local  []GhostType
	byGUID map[[16]byte]int
	// loaded maps the server's type index to a local type, for the types
	// loaded so far, in server order.
	loaded []int
	hashes []uint32

	ghosts  map[uint32]*cghost
	objects map[string]uint32

	lastTick, ackMask uint32
	serverTime        uint32
	lastCmd, cmdMask  uint32
	// changes collects the element changes of the packet being applied.
	changes []ElementChange
	// updates counts the ghosts the applied snapshots carried.
	updates uint64
}

func (w *world) report(c ElementChange) { w.changes = append(w.changes, c) }

// Elements returns one scope of an object, element id to fields.
func (w *world) Elements(object, scope string) map[string]json.RawMessage {
	id, ok := w.objects[object]
	if !ok {
		return nil
	}
	out := map[string]json.RawMessage{}
	for k, v := range w.ghosts[id].bufs[scope] {
		out[k] = v
	}
	return out
}

type cghost struct {
	object string
	typ    int // local type
	vals   []value
	// bufs are the object's scopes: element id to fields, by name;
	// names the scopes' names by the index the server gave them.
	bufs  map[string]map[string]json.RawMessage
	names map[int]string
	// fields are the field names of each scope, by index.
	fields map[int][]string
	// hist holds the latest received values, as baselines: the server
	// uses only sends among its last ghostHistory, so they are here.
	hist [ghostHistory]struct {
		tick uint32
		b    base
	}
	n uint32
}

func (g *cghost) find(tick uint32) *base {
	for i := range min(g.n, ghostHistory) {
		if h := &g.hist[i]; h.tick == tick {
			return &h.b
		}
	}
	return nil
}

func (g *cghost) push(tick uint32, b base) {
	g.hist[g.n%ghostHistory].tick, g.hist[g.n%ghostHistory].b = tick, b
	g.n++
	g.vals = b.vals
}

func newWorld(types []GhostType) *world {
	w := &world{local: types, byGUID: map[[16]byte]int{}, ghosts: map[uint32]*cghost{},
		objects: map[string]uint32{}}
	for i, t := range types {
		w.byGUID[t.GUID()] = i
	}
	return w
}

// pendingGhost is a decoded ghost not yet applied.
type pendingGhost struct {
	id     uint32
	spawn  bool
	object string
	typ    int
	b      *base
	pieces []bufPiece
}

// ElementChange is a change of one element of an object's scope, as a
// snapshot client applied it.
type ElementChange struct {
	Object, Scope, ID string
	// Fields are the element's fields now; nil if it was removed.
	Fields json.RawMessage
}

// applyPieces applies what a snapshot carried of the ghost's buffers:
// each scope's clears, then its elements; it reports each change.
func (g *cghost) applyPieces(pieces []bufPiece, report func(ElementChange)) {
	for _, p := range pieces {
		if g.fields == nil {
			g.fields = map[int][]string{}
		}
		g.fields[p.index] = p.table
		if p.name != "" {
			if g.names == nil {
				g.names = map[int]string{}
			}
			g.names[p.index] = p.name
		}
		if p.name = g.names[p.index]; p.name == "" {
			continue // (checked when decoded)
		}
		if g.bufs == nil {
			g.bufs = map[string]map[string]json.RawMessage{}
		}
		m := g.bufs[p.name]
		if m == nil {
			m = map[string]json.RawMessage{}
			g.bufs[p.name] = m
		}
		for _, c := range p.clears {
			sp := span{lo: c[0], end: c[1], first: c[0] == ""}
			for id := range m {
				if sp.covers(id) {
					delete(m, id)
					report(ElementChange{Object: g.object, Scope: p.name, ID: id})
				}
			}
		}
		for _, e := range p.entries {
			old, had := m[e.id]
			switch {
			case e.fields == nil && had:
				delete(m, e.id)
				report(ElementChange{Object: g.object, Scope: p.name, ID: e.id})
			case e.fields != nil && (!had || string(old) != string(e.fields)):
				m[e.id] = e.fields
				report(ElementChange{Object: g.object, Scope: p.name, ID: e.id, Fields: e.fields})
			}
		}
	}
}

// apply applies one snapshot packet: removals first, then additions and
// changes. A packet older than the newest applied is rejected, so applying
// one twice changes nothing; a packet that does not decode changes
// nothing.
func (w *world) apply(p []byte) error {
	r := NewReader(p)
	if r.ReadBits(8) != msgSnapshot {
		return fmt.Errorf("%w: not a snapshot", ErrBadPacket)
	}
	h := readHeader(r)
	if r.Err() != nil {
		return r.Err()
	}
	if w.lastTick != 0 && int32(h.Tick-w.lastTick) <= 0 {
		return errStale
	}
	start, list, err := readPrefabs(r)
	if err != nil {
		return err
	}
	for i, e := range list {
		if start+i != len(w.loaded) {
			continue
		}
		li, ok := w.byGUID[e.GUID]
		if !ok {
			break // not known here: neither it nor what follows loads
		}
		if w.local[li].Hash() != e.Hash {
			return ErrHashMismatch
		}
		w.loaded = append(w.loaded, li)
		w.hashes = append(w.hashes, e.Hash)
	}
	nDespawn := r.ReadBits(32)
	r.ReadBits(32) // relevant ghosts
	if int64(nDespawn)*32 > int64(r.Remaining()) {
		return fmt.Errorf("%w: %d despawns", ErrBadPacket, nDespawn)
	}
	despawns := make([]uint32, nDespawn)
	for i := range despawns {
		despawns[i] = r.ReadBits(32)
	}
	nUpdate := r.ReadPacked()
	if r.Err() != nil {
		return r.Err()
	}
	if int64(nUpdate)*4 > int64(r.Remaining()) {
		return fmt.Errorf("%w: %d ghosts", ErrBadPacket, nUpdate)
	}
	var pending []pendingGhost
	for uint32(len(pending)) < nUpdate {
		typ := r.ReadPacked()
		n := r.ReadPacked()
		r.ReadBool() // prespawn
		if r.Err() != nil {
			return r.Err()
		}
		if typ >= uint32(len(w.loaded)) || n == 0 || n > nUpdate-uint32(len(pending)) {
			return fmt.Errorf("%w: chunk of type %d with %d ghosts", ErrBadPacket, typ, n)
		}
		lt := &w.local[w.loaded[typ]]
		for got := uint32(0); got < n; {
			d0, d1 := r.ReadPacked(), r.ReadPacked()
			r.ReadPacked() // third baseline: unused
			cnt := r.ReadPacked()
			if r.Err() != nil {
				return r.Err()
			}
			if cnt == 0 || cnt > n-got || (d0 == 0 && d1 != 0) {
				return fmt.Errorf("%w: baseline group", ErrBadPacket)
			}
			codec := ghostCodec{tick: h.Tick}
			if d0 != 0 {
				codec.t0 = h.Tick - d0
			}
			if d1 != 0 {
				codec.t1 = h.Tick - d1
			}
			// (A group with baselines says whether it is compact: ids one
			// apart cost less, no data sizes or buffers.)
			codec.compact = d0 != 0 && r.ReadBool()
			prev := uint32(0)
			for range cnt {
				pg := pendingGhost{id: prev + r.ReadPacked(), typ: w.loaded[typ]}
				if codec.compact {
					pg.id++
				}
				prev = pg.id
				var b0, b1 *base
				g := w.ghosts[pg.id]
				if d0 == 0 {
					pg.spawn = true
					r.ReadPacked() // spawn tick
					pg.object = string(r.ReadBytes(MaxJSONBytes))
				} else if g == nil || g.typ != pg.typ {
					return fmt.Errorf("%w: ghost %d is not here", ErrBadPacket, pg.id)
				} else if b0 = g.find(codec.t0); b0 == nil {
					return fmt.Errorf("%w: ghost %d's baseline %d is not here", ErrBadPacket, pg.id, codec.t0)
				}
				if d1 != 0 {
					if b1 = g.find(codec.t1); b1 == nil {
						return fmt.Errorf("%w: ghost %d's baseline %d is not here", ErrBadPacket, pg.id, codec.t1)
					}
				}
				if r.Err() != nil {
					return r.Err()
				}
				vals, pieces, mask, size, err := codec.decode(r, lt, b0, b1)
				if err != nil {
					return err
				}
				pg.b = &base{vals: vals, mask: mask, size: size}
				pg.pieces = pieces
				for i := range pieces {
					var table []string
					if !pg.spawn && g != nil {
						table = g.fields[pieces[i].index]
					}
					if pieces[i].table, err = pieces[i].resolve(table); err != nil {
						return fmt.Errorf("ghost %d: %w", pg.id, err)
					}
				}
				for _, p := range pieces {
					// A buffer is named until the client has its name.
					if p.name == "" && (pg.spawn || g == nil || g.names[p.index] == "") {
						return fmt.Errorf("%w: ghost %d's buffer %d has no name here", ErrBadPacket, pg.id, p.index)
					}
				}
				pending = append(pending, pg)
			}
			got += cnt
		}
	}
	// The packet is whole: removals, then additions and changes.
	w.updates += uint64(len(pending))
	for _, id := range despawns {
		if g := w.ghosts[id]; g != nil {
			delete(w.ghosts, id)
			if w.objects[g.object] == id {
				delete(w.objects, g.object)
			}
		}
	}
	for _, pg := range pending {
		g := w.ghosts[pg.id]
		if pg.spawn && (g == nil || g.object != pg.object || g.typ != pg.typ) {
			g = &cghost{object: pg.object, typ: pg.typ}
			w.ghosts[pg.id] = g
		}
		if g == nil {
			continue // changes of a ghost despawned meanwhile
		}
		if pg.spawn {
			w.objects[pg.object] = pg.id
		}
		g.push(h.Tick, *pg.b)
		g.applyPieces(pg.pieces, w.report)
	}
	if w.lastTick != 0 {
		shift := h.Tick - w.lastTick
		if shift >= 32 {
			w.ackMask = 0
		} else {
			w.ackMask = w.ackMask<<shift | 1<<(shift-1)
		}
	}
	w.lastTick, w.serverTime = h.Tick, h.LocalTime
	w.lastCmd, w.cmdMask = h.LastCmd, h.CmdMask
	return nil
}

// Objects returns the world as reconstructed: object id to properties.
func (w *world) Objects() map[string]gameworld.Properties {
	out := make(map[string]gameworld.Properties, len(w.objects))
	for obj, id := range w.objects {
		g := w.ghosts[id]
		out[obj] = w.local[g.typ].properties(g.vals)
	}
	return out
}

// ClientOptions configures a Client. The zero value is usable.
type ClientOptions struct {
	// Types are the ghost types this client can load. Nil means
	// GenericType and TransformType.
	Types []GhostType
	// Timeout ends the connection when the server is silent this long.
	// Zero means 5 s.
	Timeout time.Duration
	// Token is sent with the handshake when the server wants one.
	Token string
	// Interest is what the client wants to be sent from the start (see
	// SetInterest). The zero value wants everything.
	Interest Interest
}

// Client is a game-engine style peer: it follows the world through
// snapshots and changes objects it owns through its commands. Its methods
// are safe for concurrent use.
type Client struct {
	conn *net.UDPConn
	opts ClientOptions
	id   string
	rate int
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	w       *world
	cmdTick uint32
	pending map[string]*pendingUpdate
	elGen   map[string]uint64 // per object and scope: the newest pending delta's number
	ver     uint64
	err     error
	changed chan struct{}
	resyncs int
	subs    map[int]func(ElementChange)
	nextSub int
	// packets and bytes count the snapshots received (Received).
	packets, bytes uint64
	// interest is the client's interest, sent with every command (its
	// ticks in interestTicks) until one that carried it is acknowledged.
	interest      *interestOf
	interestTicks []uint32
	interestAcked bool
}

// Received returns how many snapshot packets the client has received,
// and their bytes (UDP payloads).
func (c *Client) Received() (packets, bytes uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.packets, c.bytes
}

// Updates returns how many ghost updates (spawns and changes) the
// snapshots the client applied carried: over objects and time, how often
// each object's state reached it.
func (c *Client) Updates() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return 0
	}
	return c.w.updates
}

// Elements returns one scope of an object as the client holds it
// (element id to fields), or nil if it has no such object.
func (c *Client) Elements(object, scope string) map[string]json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Elements(object, scope)
}

// SubscribeElements calls fn for every element of an object's scope that
// a snapshot changes, after the snapshot is applied, in the order applied
// (a scope's removals first), from the goroutine that reads the
// connection: fn must not block for long. The returned function cancels
// the subscription.
func (c *Client) SubscribeElements(fn func(ElementChange)) (cancel func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		c.subs = map[int]func(ElementChange){}
	}
	id := c.nextSub
	c.nextSub++
	c.subs[id] = fn
	return func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}
}

type pendingUpdate struct {
	u        update
	delta    *scope.Delta // of an elements update: what it says so far
	size     int          // and about how many bytes
	ver      uint64
	sentTick uint32
	sentVer  uint64
}

// Dial connects to a snapshot server at a UDP address.
func Dial(ctx context.Context, addr string, opts ClientOptions) (*Client, error) {
	if opts.Types == nil {
		opts.Types = []GhostType{GenericType, TransformType}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if err := checkInterest(opts.Interest); err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	uc, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	c := &Client{conn: uc, opts: opts, done: make(chan struct{}), w: newWorld(opts.Types),
		pending: map[string]*pendingUpdate{}, elGen: map[string]uint64{}, changed: make(chan struct{})}
	id, rate, err := c.handshake(ctx)
	if err != nil {
		uc.Close()
		return nil, err
	}
	c.id, c.rate = id, rate
	if len(opts.Interest.Boxes) > 0 || len(opts.Interest.Rooms) > 0 {
		c.setInterestLocked(opts.Interest) // (nothing runs yet)
	}
	c.wg.Add(2)
	go c.readLoop()
	go c.commandLoop()
	return c, nil
}

// handshake proves our address with the server's cookie and waits to be
// accepted; it returns the identifier and snapshot rate the server gave.
// Only the goroutine that reads the connection calls it.
func (c *Client) handshake(ctx context.Context) (id string, rate int, err error) {
	var nonce [4]byte
	rand.Read(nonce[:])
	req := make([]byte, connectSize)
	req[0] = msgConnect
	copy(req[1:], nonce[:])
	binary.LittleEndian.PutUint16(req[5:], Version)
	buf := make([]byte, MaxPacket)
	for ctx.Err() == nil {
		c.conn.Write(req)
		c.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.conn.Read(buf)
		if err != nil || n == 0 {
			continue
		}
		switch buf[0] {
		case msgChallenge:
			if n == challengeSize && string(buf[1:5]) == string(nonce[:]) {
				req = append(append([]byte{msgResponse}, buf[1:challengeSize]...), c.opts.Token...)
			}
		case msgAccept:
			r := NewReader(buf[:n])
			r.ReadBits(8)
			if r.ReadBits(32) != binary.LittleEndian.Uint32(nonce[:]) {
				continue
			}
			rate = int(r.ReadBits(16))
			id = string(r.ReadBytes(64))
			if r.Err() != nil || rate <= 0 || !gameworld.IsIdentifier(id) {
				return "", 0, fmt.Errorf("%w: malformed accept", ErrBadPacket)
			}
			c.conn.SetReadDeadline(time.Time{})
			return id, rate, nil
		case msgDisconnect:
			if n > 1 && buf[1] == ReasonNoSession {
				// The answer to a command of the session this handshake
				// replaces (sent before a restarted server said it had
				// none): not about this connect.
				continue
			}
			if n >= outdatedSize && buf[1] == ReasonOutdated {
				return "", 0, &OutdatedError{Server: binary.LittleEndian.Uint16(buf[2:4])}
			}
			return "", 0, ErrDisconnected
		}
	}
	return "", 0, fmt.Errorf("snapshot: connecting: %w", ctx.Err())
}

// resync connects again after the server shut down or said it has no
// session for us (it restarted), trying for the client's timeout: the
// world is followed afresh, from full snapshots, and the client has a new
// identifier. It reports whether it succeeded.
func (c *Client) resync() bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	id, _, err := c.handshake(ctx)
	if err != nil {
		return false
	}
	c.mu.Lock()
	c.id = id
	updates := c.w.updates
	c.w = newWorld(c.opts.Types)
	c.w.updates = updates // (counted across sessions)
	c.resyncs++
	c.interestTicks, c.interestAcked = nil, false // a new session is told again
	c.mu.Unlock()
	return true
}

// Identifier returns the world identifier the server gave this client:
// the owner of the objects it creates. It changes when the client
// resynchronises with a restarted server.
func (c *Client) Identifier() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Resyncs returns how many times the client has connected again to a
// server that lost its session (a restart).
func (c *Client) Resyncs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resyncs
}

// Objects returns the world as this client sees it.
func (c *Client) Objects() map[string]gameworld.Properties {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Objects()
}

// Tick returns the newest snapshot tick applied.
func (c *Client) Tick() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.lastTick
}

// Changed returns a channel closed at the next snapshot applied.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Set creates or changes an object this client owns. It is sent with every
// command until the server acknowledges one that carried it.
func (c *Client) Set(id string, props map[string]any) error {
	b, err := json.Marshal(props)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	c.queue(update{ID: id, Props: b})
	return nil
}

// Remove removes an object this client owns.
func (c *Client) Remove(id string) { c.queue(update{ID: id, Op: opRemove}) }

// TakeOwnership asks the node for an object another world owns; the
// node's transfer policy decides (objects marked "transferable": true, or
// persistent, by default). Once granted, the client's Sets of the object
// are accepted, and the snapshots show them.
func (c *Client) TakeOwnership(id string) { c.queue(update{ID: id, Op: opTake}) }

// Release gives an object this client owns to the node.
func (c *Client) Release(id string) { c.queue(update{ID: id, Op: opRelease}) }

// SetElements creates elements of scope name of an object this client owns
// (a grid's blocks), or changes some of their fields (the others are
// kept): elems maps element ids to fields. Like Set, it is sent with
// every command until acknowledged, after the object's own Set; writes to
// one scope not yet acknowledged go as one delta while it fits a command
// (maxElementsDelta bytes), in several otherwise.
func (c *Client) SetElements(id, name string, elems map[string]map[string]any) error {
	mod := make(map[string]scope.Fields, len(elems))
	for eid, fields := range elems {
		f := make(scope.Fields, len(fields))
		for k, v := range fields {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("snapshot: element %s, field %s: %w", eid, k, err)
			}
			f[k] = b
		}
		mod[eid] = f
	}
	c.queueElements(id, name, mod, nil)
	return nil
}

// RemoveElements removes elements of scope name of an object this client
// owns.
func (c *Client) RemoveElements(id, name string, elems ...string) {
	c.queueElements(id, name, nil, elems)
}

// maxElementsDelta is the size past which a scope's pending writes start a
// new delta, so that each fits a command.
const maxElementsDelta = 800

// queueElements composes writes into the newest pending delta of one
// scope of an object (the node applies removals first, so an element
// removed and set again is both), starting another when it is full.
func (c *Client) queueElements(id, name string, mod map[string]scope.Fields, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	scopeKey := id + "\x00" + name
	var p *pendingUpdate
	var touched []*pendingUpdate // in the order of their deltas
	next := func(cost int) *pendingUpdate {
		if p == nil {
			p = c.pending["\x00el\x00"+scopeKey+"\x00"+strconv.FormatUint(c.elGen[scopeKey], 10)]
		}
		if p == nil || p.size+cost > maxElementsDelta && p.size > 0 {
			c.elGen[scopeKey]++
			p = &pendingUpdate{delta: &scope.Delta{Modified: map[string]scope.Fields{}}}
			c.pending["\x00el\x00"+scopeKey+"\x00"+strconv.FormatUint(c.elGen[scopeKey], 10)] = p
		}
		p.size += cost
		if !slices.Contains(touched, p) {
			touched = append(touched, p)
		}
		return p
	}
	for _, eid := range removed {
		d := next(len(eid) + 3).delta
		delete(d.Modified, eid)
		delete(d.Added, eid)
		if !slices.Contains(d.Removed, eid) {
			d.Removed = append(d.Removed, eid)
		}
	}
	for eid, f := range mod {
		cost := len(eid) + 5
		for k, v := range f {
			cost += len(k) + len(v) + 4
		}
		d := next(cost).delta
		// Set again after its removal in this delta, the element is added
		// whole (a delta may not both remove and modify one).
		into := d.Modified
		if slices.Contains(d.Removed, eid) {
			if d.Added == nil {
				d.Added = map[string]scope.Fields{}
			}
			into = d.Added
		}
		if into[eid] == nil {
			into[eid] = scope.Fields{}
		}
		maps.Copy(into[eid], f)
	}
	for _, q := range touched {
		c.ver++
		q.u = update{ID: id, Op: opElements, Scope: name, Seq: uint32(c.ver), Props: q.delta.AppendJSON(nil)}
		q.ver = c.ver
	}
}

// queue makes u pending: the latest change of each object, and apart from
// it the latest ownership request, are sent with every command until
// acknowledged. Requests go first in a command, so a Set after a
// TakeOwnership arrives after it.
func (c *Client) queue(u update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ver++
	key := u.ID
	if u.Op == opTake || u.Op == opRelease {
		key = "\x00own\x00" + u.ID
		u.Seq = uint32(c.ver)
	}
	p := c.pending[key]
	if p == nil {
		p = &pendingUpdate{}
		c.pending[key] = p
	}
	p.u, p.ver = u, c.ver
}

// SetInterest says what the client wants to be sent from now on: the
// ghosts of objects inside one of in's boxes (by their "position"
// property) and of one of its rooms (by their "room" property); objects
// without a position or a room count as inside, and the client's own
// objects are always sent. Ghosts that leave the interest are removed
// from Objects; ones that enter it arrive with their values as they are.
// It fails, changing nothing, on more than MaxInterestBoxes boxes or
// MaxInterestRooms rooms, a box that is not finite or whose min exceeds
// its max, or a room name over MaxStringBytes.
func (c *Client) SetInterest(in Interest) error {
	if err := checkInterest(in); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setInterestLocked(in)
	return nil
}

func (c *Client) setInterestLocked(in Interest) {
	seq := uint32(1)
	if c.interest != nil {
		seq = c.interest.Seq + 1
	}
	c.interest = &interestOf{Seq: seq, Interest: Interest{Boxes: slices.Clone(in.Boxes), Rooms: slices.Clone(in.Rooms)}}
	c.interestTicks, c.interestAcked = nil, false
}

// checkInterest says what is wrong with in for the wire, if anything.
func checkInterest(in Interest) error {
	if len(in.Boxes) > MaxInterestBoxes || len(in.Rooms) > MaxInterestRooms {
		return fmt.Errorf("snapshot: an interest holds at most %d boxes and %d rooms", MaxInterestBoxes, MaxInterestRooms)
	}
	for _, b := range in.Boxes {
		for i := range 3 {
			for _, v := range []float64{b.Min[i], b.Max[i]} {
				if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
					return errors.New("snapshot: an interest box must be finite (in float32)")
				}
			}
			if b.Min[i] > b.Max[i] {
				return errors.New("snapshot: an interest box's min exceeds its max")
			}
		}
	}
	for _, r := range in.Rooms {
		if len(r) > MaxStringBytes {
			return fmt.Errorf("snapshot: a room name is at most %d bytes", MaxStringBytes)
		}
	}
	return nil
}

// Done is closed when the client has stopped; Err says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped, or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close says goodbye and stops the client.
func (c *Client) Close() error {
	c.stop(nil, ReasonNormal)
	c.wg.Wait()
	return nil
}

func (c *Client) stop(err error, reason byte) {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return
	default:
	}
	c.err = err
	close(c.done)
	c.mu.Unlock()
	if reason != 0 {
		c.conn.Write([]byte{msgDisconnect, reason})
	}
	c.conn.Close()
}

func (c *Client) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, MaxPacket+1)
	heard := time.Now()
	for {
		c.conn.SetReadDeadline(heard.Add(c.opts.Timeout))
		n, err := c.conn.Read(buf)
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, syscall.ECONNREFUSED):
				// Nothing listens there now (the server is restarting):
				// only silence for the whole timeout ends the client.
				time.Sleep(10 * time.Millisecond)
				continue
			case errors.As(err, &ne) && ne.Timeout():
				c.stop(ErrTimeout, ReasonTimeout)
			default:
				c.stop(err, 0)
			}
			return
		}
		heard = time.Now()
		if n == 0 || n > MaxPacket {
			continue
		}
		switch buf[0] {
		case msgDisconnect:
			reason := byte(0)
			if n > 1 {
				reason = buf[1]
			}
			if (reason == ReasonNoSession || reason == ReasonShutdown || reason == ReasonTimeout) && c.resync() {
				continue // the server restarted, or timed this client out
			}
			err := fmt.Errorf("%w (reason %d)", ErrDisconnected, reason)
			if reason == ReasonHashMismatch {
				err = fmt.Errorf("%w: %w", ErrDisconnected, ErrHashMismatch)
			}
			c.stop(err, 0)
			return
		case msgSnapshot:
			c.mu.Lock()
			c.packets++
			c.bytes += uint64(n)
			err := c.w.apply(buf[:n])
			changes := c.w.changes
			c.w.changes = nil
			var subs []func(ElementChange)
			if err == nil {
				c.ackedLocked()
				close(c.changed)
				c.changed = make(chan struct{})
				if len(changes) > 0 {
					for _, fn := range c.subs {
						subs = append(subs, fn)
					}
				}
			}
			c.mu.Unlock()
			for _, fn := range subs {
				for _, ch := range changes {
					fn(ch)
				}
			}
			if errors.Is(err, ErrHashMismatch) {
				c.stop(err, ReasonHashMismatch)
				return
			}
		}
	}
}

// ackedLocked drops pending updates that a command the server received
// carried, unless they changed since. c.mu must be held.
func (c *Client) ackedLocked() {
	got := func(t uint32) bool {
		d := c.w.lastCmd - t
		return t != 0 && (d == 0 || (d <= 32 && c.w.cmdMask&(1<<(d-1)) != 0))
	}
	for id, p := range c.pending {
		if p.sentVer == p.ver && got(p.sentTick) {
			delete(c.pending, id)
		}
	}
	if !c.interestAcked && slices.ContainsFunc(c.interestTicks, got) {
		c.interestAcked, c.interestTicks = true, nil
	}
}

func (c *Client) commandLoop() {
	defer c.wg.Done()
	t := time.NewTicker(time.Second / time.Duration(c.rate))
	defer t.Stop()
	var w Writer
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		c.cmdTick++
		cmd := command{LocalTime: uint32(time.Now().UnixMilli()), ReturnTime: c.w.serverTime, Tick: c.cmdTick,
			AckTick: c.w.lastTick, AckMask: c.w.ackMask, Loaded: uint16(len(c.w.loaded)), Digest: digest(c.w.hashes)}
		room := MaxPacket - 40
		if c.interest != nil && !c.interestAcked {
			cmd.Interest = c.interest
			room -= 8 + 24*len(c.interest.Boxes)
			for _, r := range c.interest.Rooms {
				room -= 2 + len(r)
			}
			if len(c.interestTicks) == 32 {
				c.interestTicks = c.interestTicks[1:] // (older ones are out of the mask)
			}
			c.interestTicks = append(c.interestTicks, c.cmdTick)
		}
		due := make([]*pendingUpdate, 0, len(c.pending))
		for _, p := range c.pending {
			due = append(due, p)
		}
		// Ownership requests first, then in the order they were made;
		// a scope's elements after their object's own Set.
		order := func(p *pendingUpdate) uint64 {
			if s := c.pending[p.u.ID]; p.u.Op == opElements && s != nil {
				return max(p.ver, s.ver)
			}
			return p.ver
		}
		slices.SortFunc(due, func(a, b *pendingUpdate) int {
			ao, bo := a.u.Op == opTake || a.u.Op == opRelease, b.u.Op == opTake || b.u.Op == opRelease
			if ao != bo {
				if ao {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(order(a), order(b)); c != 0 {
				return c
			}
			if c := cmp.Compare(a.u.Op, b.u.Op); c != 0 {
				return c // (a Set before its elements)
			}
			return cmp.Compare(a.ver, b.ver)
		})
		// A scope's deltas go in order: one that does not fit holds back
		// the later ones (the server carries out each number once, and
		// would take an earlier one arriving later as done).
		var held map[string]bool
		for _, p := range due {
			n := len(p.u.ID) + len(p.u.Scope) + len(p.u.Props) + 12
			if p.u.Op == opElements && held[p.u.ID+"\x00"+p.u.Scope] {
				continue
			}
			if n > room || len(cmd.Updates) == maxUpdates {
				if p.u.Op == opElements {
					if held == nil {
						held = map[string]bool{}
					}
					held[p.u.ID+"\x00"+p.u.Scope] = true
				}
				continue
			}
			room -= n
			cmd.Updates = append(cmd.Updates, p.u)
			p.sentTick, p.sentVer = c.cmdTick, p.ver
		}
		c.mu.Unlock()
		w.Reset()
		cmd.write(&w)
		c.conn.Write(w.Bytes())
	}
}
