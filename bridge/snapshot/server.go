package snapshot

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/loop"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/scope"
)

// Options configures a Server. The zero value serves with the defaults.
type Options struct {
	// Rate is the number of snapshots per second. Zero means 60.
	Rate int
	// Types are the ghost types, in the order clients load them. Nil means
	// GenericType and TransformType. GenericType is added first if missing.
	Types []GhostType
	// Timeout drops a client not heard from for this long, and with it
	// its objects. Zero means 5 s.
	Timeout time.Duration
	// TypeOf, if set, names the ghost type of an object that has no
	// ghostType property (a configured rule, say by the properties it
	// has). An empty or unknown name means GenericType.
	TypeOf func(props gameworld.Properties) string
	// Auth, if set, checks the token a client sends with its handshake
	// response; without a valid one it is refused. The client's identifier
	// takes a prefix the token grants. Nil means no authentication.
	Auth auth.Authenticator
	// MaxClients bounds connected clients. Zero means 1024.
	MaxClients int
	// MaxKbps bounds what each client is sent, in kilobits (1,000 bits)
	// of UDP payload a second: a packet holds at most MaxKbps×1000/Rate
	// bits (and at least the header and despawns; never over MaxPacket),
	// and what does not fit waits, most urgent first. Zero means no bound
	// but MaxPacket (576 kbit/s at 60 Hz).
	MaxKbps int
	// InterestMargin grows a client's region (Interest) for the ghosts it
	// holds, so that one moving along the edge is not despawned and
	// spawned again at every step. Zero means relay.DefaultInterestMargin,
	// as on the WebSocket wire; negative means none.
	InterestMargin float64
	// Near, if positive, makes the ghosts within this distance of the
	// centre of a client's region the most urgent when a packet cannot
	// hold every change, and each doubling of the distance beyond half as
	// urgent, over four bands (relevance.go). Zero: distance does not
	// count.
	Near float64
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Server serves a node's world as snapshots over UDP. Its methods are
// safe for concurrent use.
type Server struct {
	node *relay.Node
	opts Options
	log  *slog.Logger
	conn *net.UDPConn
	obs  *relay.Attachment
	// secret keys the cookies that prove a client's address.
	secret [32]byte
	start  time.Time
	clock  func() uint32 // the header's local time; nil: ms since start

	// inbox holds the node's deliveries until the next tick.
	inbox relay.Inbox
	// wake resumes the ticks, which stop while there is no client.
	wake chan struct{}

	mu      sync.Mutex
	types   []GhostType
	hashes  []uint32
	byName  map[string]int
	objects map[string]*ghost
	// list holds the ghosts by slot, for iteration; free lists empty slots.
	list    []*ghost
	free    []int
	nextID  uint32
	tick    uint32
	clients map[netip.AddrPort]*conn
	// outdatedLogged is when a connect of another version was last
	// logged.
	outdatedLogged time.Time
	closed         bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ghost is one replicated object.
type ghost struct {
	id      uint32
	slot    int
	object  string
	typ     int
	vals    []value
	changed uint32 // tick its values last changed
	spawn   uint32 // tick it was created
	// bufs are its object's scopes (buffers.go), by name; bufChanged
	// the tick one last changed.
	bufs       map[string]*gbuf
	bufChanged uint32
	// owner, pos and room are its object's, for relevancy.
	owner  string
	pos    [3]float64
	hasPos bool
	room   string
}

// conn is the server's view of one client.
type conn struct {
	// version is the wire version the client said in its connect.
	version uint16
	// peer lists the client in the node's state and metrics.
	peer       *relay.BridgedPeer
	addr       netip.AddrPort
	nonce      uint32
	agent      *relay.Attachment
	identifier string
	heard      time.Time
	loaded     int
	seq        uint8
	lastCmd    uint32
	cmdMask    uint32
	cmdTime    uint32 // the client's LocalTime of its newest command
	cmdAt      time.Time
	ring       [ringSize]*sent
	// ackDelay is how many ticks after a snapshot its acknowledgement
	// comes, on average.
	ackDelay float64
	// ghosts holds what the client knows of each ghost, by slot.
	ghosts   []*clientGhost
	despawns map[uint32]bool
	// rel is the client's interest; nil: it wants every ghost.
	rel     *relevance
	refused bool
	// ops holds the newest take or release carried out per object, so
	// that a repeated one is not carried out again. Bounded by maxOps.
	ops map[string]uint32
	// cands, keys, chosen and layout are snapshotLocked's scratch, kept
	// between ticks.
	cands          []candidate
	keys           []candKey
	chosen, layout []candidate
}

// window is how many ticks a send of buffer elements is taken to be on
// its way: what it carries is sent again only after that, unacknowledged.
func (c *conn) window() uint32 {
	return uint32(min(8, math.Round(c.ackDelay)+1))
}

// maxOps bounds a client's remembered ownership requests; beyond it the
// memory starts afresh (a repeat then asks again, harmlessly for a take
// already granted).
const maxOps = 1024

// ringSize is how many snapshots sent to a client are remembered, for
// their acknowledgements.
const ringSize = 32

// sent is one snapshot sent to a client: which ghosts and despawns it
// carried.
type sent struct {
	tick     uint32
	acked    bool
	ghosts   []int // slots
	ids      []uint32
	despawns []uint32
}

// ghostHistory is how many sends of one ghost to one client are kept as
// possible baselines. A client keeps as many received ones, so it has
// every send the server may use.
const ghostHistory = 16

// send is one send of a ghost to a client.
type send struct {
	tick  uint32
	acked bool
	b     base
	// spans are the ranges of its buffers the client holds complete as
	// of this send once it has it; named what it carried of its buffers'
	// names.
	spans []span
	named []naming
}

// naming is what a send carried of a buffer's names: the scope's own, and
// its field names up to fields.
type naming struct {
	scope  string
	name   bool
	fields int
}

// clientGhost is what a client knows of a ghost: its latest sends. A
// ghost that does not change is not sent, so its baselines may be old.
type clientGhost struct {
	id       uint32
	lastSent uint32
	acked    uint32 // the newest acknowledged send's tick
	sends    [ghostHistory]send
	n        uint32 // sends so far; the latest is sends[(n-1)%ghostHistory]
	// bufs is what the client holds of the ghost's buffers, as far as it
	// acknowledged, by scope; names the scopes whose names it has.
	bufs  map[string][]tier
	names map[string]bool
	// fields is how many of each buffer's field names the client has.
	fields map[string]int
}

// inflight returns what the client holds of the buffer of scope name as
// far as it acknowledged, and as far as the sends of the last window ticks
// that it has not acknowledged yet (on their way, most likely) carry:
// what they carry is not sent again until they are overdue.
func (cg *clientGhost) inflight(name string, tick, window uint32) []tier {
	ts := cg.bufs[name]
	for i := min(cg.n, ghostHistory); i > 0; i-- { // oldest first
		s := &cg.sends[(cg.n-i)%ghostHistory]
		if s.acked || tick-s.tick > window {
			continue
		}
		for _, sp := range s.spans {
			if sp.name == name {
				ts = mark(ts, sp, s.tick)
			}
		}
	}
	return ts
}

// bufsDone reports whether the client holds every buffer of g whole and
// up to date, as far as it acknowledged. (Not whether an acknowledged send
// came after the last change: a send may leave out changes on their way.)
func (cg *clientGhost) bufsDone(g *ghost) bool {
	for name, b := range g.bufs {
		ts := cg.bufs[name]
		if !b.complete(ts) {
			return false
		}
		if n := len(b.log); n > 0 && b.log[n-1].tick > heldAsOf(ts, span{first: true}) {
			return false
		}
	}
	return true
}

// baselines returns the newest two acknowledged sends, newest first.
func (cg *clientGhost) baselines() (b0, b1 *send) {
	for i := range min(cg.n, ghostHistory) {
		s := &cg.sends[(cg.n-1-i)%ghostHistory]
		if !s.acked {
			continue
		}
		if b0 == nil {
			b0 = s
		} else {
			return b0, s
		}
	}
	return b0, nil
}

func (cg *clientGhost) add(tick uint32, b base, spans []span, named []naming) {
	cg.sends[cg.n%ghostHistory] = send{tick: tick, b: b, spans: spans, named: named}
	cg.n++
	cg.lastSent = tick
}

func (cg *clientGhost) ack(tick uint32) {
	for i := range min(cg.n, ghostHistory) {
		if s := &cg.sends[i]; s.tick == tick && !s.acked {
			s.acked = true
			cg.acked = max(cg.acked, tick)
			for _, sp := range s.spans {
				if cg.bufs == nil {
					cg.bufs = map[string][]tier{}
				}
				// A send of changes since a tick the client was only
				// thought to hold (a send on its way, then lost) leaves
				// it short: not held until sent again.
				if sp.base == 0 || heldAsOf(cg.bufs[sp.name], sp) >= sp.base {
					cg.bufs[sp.name] = mark(cg.bufs[sp.name], sp, tick)
				}
			}
			for _, nm := range s.named {
				if cg.names == nil {
					cg.names, cg.fields = map[string]bool{}, map[string]int{}
				}
				if nm.name {
					cg.names[nm.scope] = true
				}
				cg.fields[nm.scope] = max(cg.fields[nm.scope], nm.fields)
			}
		}
	}
}

// Listen starts a server on a UDP address serving n's world.
func Listen(n *relay.Node, addr string, opts Options) (*Server, error) {
	if opts.Rate <= 0 {
		opts.Rate = 60
	}
	switch {
	case opts.InterestMargin == 0:
		opts.InterestMargin = relay.DefaultInterestMargin
	case opts.InterestMargin < 0:
		opts.InterestMargin = 0
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = 1024
	}
	if opts.Types == nil {
		opts.Types = []GhostType{GenericType, TransformType}
	}
	if len(opts.Types) == 0 || opts.Types[0].Name != GenericType.Name {
		opts.Types = append([]GhostType{GenericType}, opts.Types...)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	s := &Server{node: n, opts: opts, log: log.With("bridge", "snapshot"), conn: uc, start: time.Now(),
		byName: map[string]int{}, objects: map[string]*ghost{}, clients: map[netip.AddrPort]*conn{}, tick: 1,
		wake: make(chan struct{}, 1)}
	rand.Read(s.secret[:])
	for _, t := range opts.Types {
		if err := s.addTypeLocked(t); err != nil {
			uc.Close()
			return nil, err
		}
	}
	s.inbox.Wake = s.wake // what comes while it sleeps (the world's removes when the last client left) is taken
	obs, err := n.Attach(relay.AttachOptions{Receiver: &s.inbox})
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("snapshot: joining the node: %w", err)
	}
	s.obs = obs
	obs.SetInterest(nil, true) // nothing until a client connects
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go s.readLoop()
	go s.tickLoop(ctx)
	return s, nil
}

// Addr returns the UDP address the server listens on.
func (s *Server) Addr() net.Addr { return s.conn.LocalAddr() }

// AddType registers a ghost type while serving; connected clients are
// told about it like about the others.
func (s *Server) AddType(t GhostType) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addTypeLocked(t)
}

func (s *Server) addTypeLocked(t GhostType) error {
	if err := t.validate(); err != nil {
		return err
	}
	if _, dup := s.byName[t.Name]; dup {
		return fmt.Errorf("snapshot: ghost type %q registered twice", t.Name)
	}
	s.byName[t.Name] = len(s.types)
	s.types = append(s.types, t)
	s.hashes = append(s.hashes, t.Hash())
	return nil
}

// Close disconnects every client and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	var agents []*relay.Attachment
	for _, c := range s.clients {
		s.send(c.addr, []byte{msgDisconnect, ReasonShutdown})
		agents = append(agents, c.agent)
	}
	s.clients = map[netip.AddrPort]*conn{}
	s.mu.Unlock()
	s.cancel()
	s.conn.Close()
	s.wg.Wait()
	for _, a := range agents {
		a.Detach()
	}
	s.obs.Detach()
}

func (s *Server) send(addr netip.AddrPort, p []byte) {
	s.conn.WriteToUDPAddrPort(p, addr) //nolint:errcheck // UDP: loss is expected
}

func (s *Server) now() uint32 {
	if s.clock != nil {
		return s.clock()
	}
	return uint32(time.Since(s.start).Milliseconds())
}

// cookie proves that a client receives at addr: it is keyed by the
// server's secret and valid for the current and the previous 10 s window.
// It binds the version the connect said, which the response, carrying the
// cookie back, thus tells without the server keeping anything.
func (s *Server) cookie(addr netip.AddrPort, nonce uint32, window int64, version uint16) [16]byte {
	m := hmac.New(sha256.New, s.secret[:])
	b, _ := addr.MarshalBinary()
	m.Write(b)
	binary.Write(m, binary.LittleEndian, nonce)
	binary.Write(m, binary.LittleEndian, window)
	if version != Version {
		binary.Write(m, binary.LittleEndian, version) // (a version 2 cookie is as it always was)
	}
	var c [16]byte
	copy(c[:], m.Sum(nil))
	return c
}

func (s *Server) readLoop() {
	defer s.wg.Done()
	buf := make([]byte, MaxPacket+1)
	for {
		n, addr, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n == 0 || n > MaxPacket {
			continue
		}
		s.handle(addr, buf[:n])
	}
}

// handle serves one datagram. Nothing larger than the datagram goes to an
// address that has not proved it receives there.
func (s *Server) handle(addr netip.AddrPort, p []byte) {
	switch p[0] {
	case msgConnect:
		if len(p) < connectSize {
			return // a reply would be larger than the request
		}
		v := binary.LittleEndian.Uint16(p[5:7])
		if v < OldestVersion || v > Version {
			s.outdated(addr, v)
			return
		}
		if s.node.Draining() {
			// (A client connects again on "shutdown": by then to a node
			// that serves.)
			s.send(addr, []byte{msgDisconnect, ReasonShutdown})
			return
		}
		nonce := binary.LittleEndian.Uint32(p[1:5])
		c := s.cookie(addr, nonce, time.Now().Unix()/10, v)
		reply := append([]byte{msgChallenge, p[1], p[2], p[3], p[4]}, c[:]...)
		s.send(addr, reply)
	case msgResponse:
		if len(p) < 1+4+16 {
			return
		}
		nonce := binary.LittleEndian.Uint32(p[1:5])
		w := time.Now().Unix() / 10
		version := uint16(0)
		for v := uint16(Version); v >= OldestVersion && version == 0; v-- {
			c0, c1 := s.cookie(addr, nonce, w, v), s.cookie(addr, nonce, w-1, v)
			if hmac.Equal(p[5:21], c0[:]) || hmac.Equal(p[5:21], c1[:]) {
				version = v
			}
		}
		if version == 0 {
			return
		}
		s.accept(addr, nonce, string(p[21:]), version)
	case msgCommand:
		s.command(addr, p)
	case msgDisconnect:
		s.mu.Lock()
		c := s.clients[addr]
		if c != nil && len(p) > 1 && p[1] == ReasonHashMismatch {
			s.log.Info("client found a ghost type's hash mismatch", "addr", addr)
		}
		s.dropLocked(c)
		s.mu.Unlock()
	}
}

// outdated refuses a connect of wire version v (not ours), telling the
// client ours, and logs it at most once a second (the source is not
// proven: anyone may send such connects).
func (s *Server) outdated(addr netip.AddrPort, v uint16) {
	reply := []byte{msgDisconnect, ReasonOutdated, 0, 0}
	binary.LittleEndian.PutUint16(reply[2:], Version)
	s.send(addr, reply)
	s.mu.Lock()
	now := time.Now()
	log := now.Sub(s.outdatedLogged) >= time.Second
	if log {
		s.outdatedLogged = now
	}
	s.mu.Unlock()
	if log {
		s.log.Info("refused a snapshot client of another wire version", "addr", addr, "client_version", v, "server_version", Version)
	}
}

// accept admits a client whose address is proven, or answers its repeated
// response again.
func (s *Server) accept(addr netip.AddrPort, nonce uint32, token string, version uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	c := s.clients[addr]
	if c != nil && c.nonce != nonce {
		s.dropLocked(c) // the same address connecting anew
		c = nil
	}
	if c == nil {
		if len(s.clients) >= s.opts.MaxClients {
			s.send(addr, []byte{msgDisconnect, ReasonRefused})
			return
		}
		var grant *auth.Grant
		if s.opts.Auth != nil {
			g, err := s.opts.Auth.Authenticate(token)
			if err != nil {
				s.log.Info("refused a UDP client without a valid token", "addr", addr, "err", err)
				s.send(addr, []byte{msgDisconnect, ReasonRefused})
				return
			}
			grant = g
		}
		prefix, ok := grant.Prefix("udppeer")
		if !ok {
			s.send(addr, []byte{msgDisconnect, ReasonRefused})
			return
		}
		id := gameworld.NewIdentifier(prefix)
		agent, err := s.node.Attach(relay.AttachOptions{Identifier: id})
		if err != nil {
			s.send(addr, []byte{msgDisconnect, ReasonRefused})
			return
		}
		c = &conn{version: version, addr: addr, nonce: nonce, agent: agent, identifier: id, despawns: map[uint32]bool{}, peer: s.node.TrackPeer(relay.PeerSnapshot, addr.String())}
		c.peer.SetIdentifier(id)
		s.clients[addr] = c
		if len(s.clients) == 1 {
			s.obs.SetInterest(nil, false)
			loop.Wake(s.wake)
		}
		s.log.Debug("client connected", "addr", addr, "identifier", id, "version", version)
	}
	c.heard = time.Now()
	var w Writer
	w.WriteBits(msgAccept, 8)
	w.WriteBits(nonce, 32)
	w.WriteBits(uint32(s.opts.Rate), 16)
	w.WriteBytes([]byte(c.identifier))
	s.send(addr, w.Bytes())
}

// dropLocked forgets a client and removes its objects. s.mu must be held.
func (s *Server) dropLocked(c *conn) {
	if c == nil || s.clients[c.addr] != c {
		return
	}
	delete(s.clients, c.addr)
	c.peer.Done()
	if len(s.clients) == 0 && !s.closed {
		s.obs.SetInterest(nil, true)
	}
	// The node never calls the server under its lock except Receive,
	// which takes the inbox's lock only, so detaching under s.mu cannot
	// deadlock.
	c.agent.Detach()
}

// command takes a client's command packet.
func (s *Server) command(addr netip.AddrPort, p []byte) {
	version := uint16(Version)
	s.mu.Lock()
	if c := s.clients[addr]; c != nil {
		version = c.version
	}
	s.mu.Unlock()
	cmd, err := decodeCommandVersion(p, version)
	s.mu.Lock()
	c := s.clients[addr]
	if c == nil && err == nil && !s.closed {
		// A well-formed command from a source we have no session for: a
		// client of a node that restarted. It is told to connect again
		// (a reply smaller than the command: nothing to amplify).
		s.mu.Unlock()
		s.send(addr, []byte{msgDisconnect, ReasonNoSession})
		return
	}
	if c == nil || err != nil || (c.lastCmd != 0 && int32(cmd.Tick-c.lastCmd) <= 0) {
		// Stale and repeated commands change nothing.
		s.mu.Unlock()
		return
	}
	c.heard = time.Now()
	if c.lastCmd != 0 {
		shift := cmd.Tick - c.lastCmd
		if shift >= 32 {
			c.cmdMask = 0
		} else {
			c.cmdMask = c.cmdMask<<shift | 1<<(shift-1)
		}
	}
	c.lastCmd, c.cmdTime, c.cmdAt = cmd.Tick, cmd.LocalTime, time.Now()
	s.ackLocked(c, cmd.AckTick, cmd.AckMask)
	loaded := min(int(cmd.Loaded), len(s.types))
	if digest(s.hashes[:loaded]) != cmd.Digest {
		s.log.Info("refusing a client whose ghost types do not match ours", "addr", addr, "loaded", loaded)
		s.send(addr, []byte{msgDisconnect, ReasonHashMismatch})
		s.dropLocked(c)
		s.mu.Unlock()
		return
	}
	c.loaded = loaded
	if cmd.Interest != nil {
		c.setInterestLocked(cmd.Interest)
	}
	agent := c.agent
	s.mu.Unlock()
	if len(cmd.Updates) > 0 {
		ups := cmd.Updates[:0:0]
		s.mu.Lock()
		for _, u := range cmd.Updates {
			if u.numbered() {
				key := u.ID
				if u.Op == opElements {
					key = u.ID + "\x00" + u.Scope
				}
				if last, ok := c.ops[key]; ok && int32(u.Seq-last) <= 0 {
					continue // carried out already
				}
				if c.ops == nil || len(c.ops) >= maxOps {
					c.ops = map[string]uint32{}
				}
				c.ops[key] = u.Seq
			}
			ups = append(ups, u)
		}
		s.mu.Unlock()
		s.applyUpdates(agent, ups)
	}
}

// applyUpdates applies a client's changes to objects it owns; the node's
// ownership rules refuse the rest.
func (s *Server) applyUpdates(agent *relay.Attachment, ups []update) {
	world := s.node.World()
	changes := make([]gameworld.Change, 0, len(ups))
	for _, u := range ups {
		switch u.Op {
		case opRemove:
			changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: u.ID})
			continue
		case opTake:
			changes = append(changes, gameworld.Change{Type: gameworld.Transfer, ID: u.ID, Owner: agent.Identifier()})
			continue
		case opRelease:
			changes = append(changes, gameworld.Change{Type: gameworld.Transfer, ID: u.ID, Owner: ""})
			continue
		case opElements:
			// A scope delta the node numbers (ver 0): checked by ownership,
			// the node's scope limits and schemas, as any write.
			d, err := scope.Limits{}.DecodeDelta(u.Props)
			if err != nil || d.Ver != 0 || u.Scope == "" {
				s.log.Debug("refused an elements update from a UDP client", "id", u.ID, "scope", u.Scope, "err", err)
				continue
			}
			changes = append(changes, gameworld.Change{Type: gameworld.Update, ID: u.ID, Scopes: map[string]scope.Delta{u.Scope: d}})
			continue
		}
		var props gameworld.Properties
		if json.Unmarshal(u.Props, &props) != nil || u.ID == "" {
			continue
		}
		typ := gameworld.Update
		if _, ok := world.Get(u.ID); !ok {
			typ = gameworld.Add
		}
		changes = append(changes, gameworld.Change{Type: typ, ID: u.ID, Properties: props})
	}
	res, err := agent.Apply(changes)
	if err == nil && len(res.Refused) > 0 {
		// The snapshot protocol has no text to tell the client why; it is
		// sent its own ghosts back, so it sees the node's values.
		s.log.Debug("refused updates from a UDP client", "count", len(res.Refused), "first", res.Refused[0].Err)
	}
}

// ackLocked marks the snapshots a command acknowledges. s.mu must be held.
func (s *Server) ackLocked(c *conn, tick, mask uint32) {
	if tick == 0 {
		return
	}
	for i := -1; i < 32; i++ {
		t := tick
		if i >= 0 {
			if mask&(1<<i) == 0 {
				continue
			}
			t = tick - 1 - uint32(i)
		}
		sn := c.ring[t%ringSize]
		if sn == nil || sn.tick != t || sn.acked {
			continue
		}
		sn.acked = true
		if i == -1 {
			c.ackDelay += (float64(s.tick-t) - c.ackDelay) / 8
		}
		for i, slot := range sn.ghosts {
			if slot < len(c.ghosts) {
				if cg := c.ghosts[slot]; cg != nil && cg.id == sn.ids[i] {
					cg.ack(t)
				}
			}
		}
		for _, id := range sn.despawns {
			delete(c.despawns, id)
		}
	}
}

func (s *Server) tickLoop(ctx context.Context) {
	defer s.wg.Done()
	loop.EveryWhileBusy(ctx, time.Second/time.Duration(s.opts.Rate), s.wake, s.step)
}

// step advances one tick: takes the world's changes, drops silent
// clients, and sends every client its snapshot. It reports whether the
// next tick has anything to do: without clients (the node then sends the
// server nothing) ticks wait until one connects; tick numbers mean
// nothing to a client but relative to one another.
func (s *Server) step() (busy bool) {
	in := s.inbox.Take()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	for _, d := range in {
		s.applyLocked(d)
	}
	now := time.Now()
	var buf Writer
	for _, c := range s.clients {
		if now.Sub(c.heard) > s.opts.Timeout {
			s.log.Debug("client timed out", "addr", c.addr)
			s.send(c.addr, []byte{msgDisconnect, ReasonTimeout})
			s.dropLocked(c)
			continue
		}
		buf.Reset()
		s.snapshotLocked(c, &buf)
		s.send(c.addr, buf.Bytes())
	}
	return len(s.clients) > 0 || len(in) > 0
}

// applyLocked takes one change of the world into the ghosts. s.mu must be
// held.
func (s *Server) applyLocked(d relay.Delivery) {
	g := s.objects[d.ID]
	if d.Type == gameworld.Remove || d.After.IsZero() {
		if d.Type == gameworld.Remove && g != nil {
			s.despawnLocked(g)
		}
		return
	}
	typ := s.typeOf(d.After)
	var bufs map[string]*gbuf
	if g != nil && g.typ != typ {
		s.despawnLocked(g) // a new type is a new ghost
		bufs, g = g.bufs, nil
	}
	vals := s.types[typ].quantize(d.After)
	if g == nil {
		s.nextID++
		g = &ghost{id: s.nextID, object: d.ID, typ: typ, vals: vals, changed: s.tick, spawn: s.tick, bufs: bufs}
		if g.applyScopes(d.Scopes, s.tick) || len(g.bufs) > 0 {
			g.bufChanged = s.tick
		}
		g.place(d.Owner, d.After)
		s.objects[d.ID] = g
		if n := len(s.free); n > 0 {
			g.slot, s.free = s.free[n-1], s.free[:n-1]
			s.list[g.slot] = g
		} else {
			g.slot = len(s.list)
			s.list = append(s.list, g)
		}
		return
	}
	if !slices.EqualFunc(g.vals, vals, value.equal) {
		g.vals, g.changed = vals, s.tick
	}
	g.place(d.Owner, d.After)
	if g.applyScopes(d.Scopes, s.tick) {
		g.bufChanged = s.tick
	}
}

func (s *Server) typeOf(props gameworld.Properties) int {
	var name string
	if raw, ok := props.Get(TypeProperty); ok {
		json.Unmarshal(raw, &name)
	} else if s.opts.TypeOf != nil {
		name = s.opts.TypeOf(props)
	}
	if i, ok := s.byName[name]; ok {
		return i
	}
	return 0
}

func (s *Server) despawnLocked(g *ghost) {
	delete(s.objects, g.object)
	s.list[g.slot] = nil
	s.free = append(s.free, g.slot)
	for _, c := range s.clients {
		if g.slot < len(c.ghosts) && c.ghosts[g.slot] != nil {
			c.ghosts[g.slot] = nil
			c.despawns[g.id] = true
		}
	}
}
