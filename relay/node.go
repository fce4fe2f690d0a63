package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/store"
)

// ErrClosed is returned by a Node that has been closed.
var ErrClosed = errors.New("relay: node closed")

// Node is one world shared over many links. Its methods are safe for
// concurrent use.
//
// Its state is grouped by concern, each group a type of the file that
// owns the concern: the links (hub), the shared log (fan), interest (sp),
// departures (deps), transfers (xfer), the upstream (up), quotas and
// digests. Unless a group says otherwise, all of it is guarded by mu.
type Node struct {
	opts  Options
	role  ownership.Role
	id    string
	log   *slog.Logger
	world *gameworld.World

	// mu serialises the node: every change to the world and its routing
	// (applying, the shared log, flushes) and the groups below. Links'
	// handlers take it for a whole message, so one link's messages apply
	// in order and all links see one order. Held, the node only queues on
	// links (peer.Link.Offer never blocks) and calls Receivers, which must
	// not call back; it never waits on the network or the disk (the store
	// writes on its own goroutine). Methods named ...Locked must be called
	// with it held.
	mu sync.Mutex

	life  lifecycle
	hub   hub
	fan   fanout
	sp    space
	deps  departures
	xfer  transfers
	up    upstreamLink
	quota quotaState
	dig   digests
}

// lifecycle is what runs the node and what it writes: its context and
// goroutines, its store, its metrics.
type lifecycle struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time
	closed  bool
	// workers run the links' writers and message handling.
	workers peer.Workers
	// metrics is nil unless Options.Registerer is set.
	metrics *nodeMetrics
	// persist keeps durable objects in Options.Store (persist.go); nil
	// without one, and once closing. persistStats stays for metrics.
	persist, persistStats *persist
}

// hub is the registry of the node's peers: links, attachments, the peers
// bridges serve, and which link claims which world.
type hub struct {
	links map[*peer.Link]*linkState
	order []*linkState // links in accept order, for routing without map iteration
	atts  []*Attachment
	// claims maps a world identifier to the downstream or mesh link whose
	// identifierChain holds it.
	claims map[string]*linkState
	nextID uint64
	totals closedTotals
	// perIP counts downstream connections per address.
	perIP map[string]int
	// bridged are the peers bridges serve (bridged.go).
	bridged bridgedSet
	// mesh is the mesh the node joined, if any (mesh.go).
	mesh *Mesh
	// resumeSecret keys the resume tokens this node hands out.
	resumeSecret []byte
}

// departures are the worlds whose objects are being removed a slice at a
// time (departures.go).
type departures struct {
	departing map[string]*departure
	// yieldHook, if set (by tests), runs whenever a long task lets the
	// lock go (yieldLocked).
	yieldHook func()
}

// transfers are the transfer requests waiting for the upstream's answer,
// and the answers a mesh server holds for its members' acknowledgements,
// by object (answers.go).
type transfers struct {
	asked map[string]*upRequests
	held  map[string]*held
}

// upstreamLink is what the node asks of its upstream and was given by it
// (upstream.go, ready.go).
type upstreamLink struct {
	// status is what RunUpstream knows of the upstream, under a mutex of
	// its own.
	status upstreamState
	// onReady is UpstreamOptions.OnReady.
	onReady func()
	// rooms are the rooms a client node is in (SetRooms), interest what
	// it wants to see (SetInterest); nil means all.
	rooms    []string
	interest []peer.Box
	// tokens are the resume tokens the upstream handed us.
	tokens map[string]string
}

// quotaState is what quotas count (quota.go).
type quotaState struct {
	// owned counts objects per owner, for Quotas.ObjectsPerOwner.
	owned map[string]int
	// batchAdds counts the adds a batch being applied has let in so
	// far, per owner.
	batchAdds map[string]int
	// worldWarned is when a write over the world's bounds was last
	// logged.
	worldWarned time.Time
}

// digests is what anti-entropy counted and may spend (digest.go).
type digests struct {
	repairs repairCounts
	budget  *rate.Limiter
}

// linkState is the node's view of one link; guarded by Node.mu.
type linkState struct {
	// link is the peer's link; nil for an attachment (att).
	link *peer.Link
	att  *Attachment
	kind ownership.LinkKind
	// chain is the identifierChain the peer advertised. For downstream and
	// mesh links it holds exactly the identifiers this link claims.
	chain map[string]bool
	// ready links receive routed changes: downstream and mesh links once
	// their metadata is known, upstream links at once.
	ready          bool
	refreshPending bool
	// askedRefresh: the upstream has been sent its requestRefresh.
	askedRefresh bool
	// refreshWanted: the next flush answers the link's refresh request.
	refreshWanted bool
	// refreshing: a refresh answer of a big world is under way, a slice
	// per turn of the node's lock; refreshAt is the world slot it goes on
	// from (sendRefreshLocked).
	refreshing bool
	refreshAt  uint32
	// revealing is set while a region change over a big world is being
	// looked at a slice at a time (continueRevealLocked); revealAt is the
	// world slot it goes on from.
	revealing bool
	revealAt  uint32
	// answers are the objects whose owner this peer asked about: the
	// next flush tells it, after what the log held (transfer.go).
	answers   map[string]bool
	sweep     *sweep
	remoteURL string
	// member is the memberlist name of a mesh link's peer.
	member string
	// detached mesh links have closed while their member is still alive:
	// their claims (and objects) are kept for the re-dialed link.
	detached bool
	// region is what the peer wants to see; nil means everything.
	region *region
	// regionNext is when region may change next; wanted, if not nil, is
	// a region announced since, applied then (interestChangedLocked).
	regionNext time.Time
	wanted     *wantedRegion
	// grant is what the peer's token allows; nil when authentication is
	// off (or for upstream and mesh links).
	grant *auth.Grant
	// release frees the link's place in the per-address count.
	release func()
	// digest is the link's anti-entropy schedule (digest.go).
	digest digestState
	// presence holds the ids of the presence objects this node made for
	// the peer, by room (presence.go).
	presence map[string]string
}

// New returns a node. Call Close to stop it.
func New(opts Options) (*Node, error) {
	if opts.Role == 0 {
		opts.Role = ownership.Server
	}
	var stored store.State
	if opts.Store != nil {
		st, err := opts.Store.Load()
		if err != nil {
			return nil, fmt.Errorf("relay: loading the store: %w", err)
		}
		if opts.Identifier == "" {
			opts.Identifier = st.Identifier
		}
		if len(opts.ResumeSecret) == 0 {
			opts.ResumeSecret = st.ResumeSecret
		}
		stored = st
	}
	if opts.Identifier == "" {
		prefix := opts.Prefix
		if prefix == "" {
			prefix = opts.Role.String()
		}
		opts.Identifier = gameworld.NewIdentifier(prefix)
	}
	if !gameworld.IsIdentifier(opts.Identifier) {
		return nil, fmt.Errorf("relay: identifier %q is not of the form prefix-XXXXXXXX-XXXXXXXX (prefix of letters, digits and dashes; X letters or digits)", opts.Identifier)
	}
	if opts.Tick == 0 {
		opts.Tick = peer.DefaultTick
	}
	if opts.DigestInterval == 0 {
		opts.DigestInterval = DefaultDigestInterval
	}
	if opts.ReclaimGrace == 0 {
		opts.ReclaimGrace = DefaultReclaimGrace
	}
	opts.Quotas.defaults()
	if opts.InterestProperty == "" {
		opts.InterestProperty = DefaultInterestProperty
	}
	if opts.RoomProperty == "" {
		opts.RoomProperty = DefaultRoomProperty
	}
	switch {
	case opts.InterestMargin == 0:
		opts.InterestMargin = DefaultInterestMargin
	case opts.InterestMargin < 0:
		opts.InterestMargin = 0
	}
	if opts.InterestCell <= 0 {
		opts.InterestCell = DefaultInterestCell
	}
	if opts.MetadataTimeout == 0 {
		opts.MetadataTimeout = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	secret := opts.ResumeSecret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	n := &Node{
		opts: opts, role: opts.Role, id: opts.Identifier,
		log:   log.With("node", opts.Identifier),
		world: gameworld.New(opts.Identifier),
		life:  lifecycle{ctx: ctx, cancel: cancel, started: time.Now()},
		hub:   hub{links: make(map[*peer.Link]*linkState), claims: make(map[string]*linkState), resumeSecret: secret},
		fan:   fanout{kick: make(chan struct{}, 1)},
		deps:  departures{departing: make(map[string]*departure)},
		// A burst as large as the largest world a digest may cover.
		dig: digests{budget: rate.NewLimiter(digestVisitsPerSecond, 10_000_000)},
	}
	if opts.Store != nil {
		n.openStoreLocked(opts.Store, stored)
		n.life.persistStats = n.life.persist
	}
	if opts.Registerer != nil {
		n.life.metrics = newNodeMetrics(n.role.String())
		for _, c := range []prometheus.Collector{newCollector(n), n.life.metrics.tick, n.life.metrics.delivery, n.life.metrics.limited, n.life.metrics.repairs, n.life.metrics.digest, n.life.metrics.messages} {
			if err := opts.Registerer.Register(c); err != nil {
				cancel()
				return nil, fmt.Errorf("relay: registering metrics: %w", err)
			}
		}
	}
	if opts.Tick != peer.Immediate {
		n.life.wg.Add(1)
		go n.tickLoop()
	}
	if n.opts.DigestInterval > 0 {
		n.life.wg.Add(1)
		go n.digestLoop()
	}
	return n, nil
}

// Identifier returns the node's world identifier.
func (n *Node) Identifier() string { return n.id }

// Role returns the node's role.
func (n *Node) Role() ownership.Role { return n.role }

// World returns the node's world. Read it freely; change it only through
// the Node (Apply), which routes the changes.
func (n *Node) World() *gameworld.World { return n.world }

// Close closes every link and waits for them to finish, or for ctx.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	w := n.closeStoreLocked()
	n.life.closed = true
	if n.sp.timer != nil {
		n.sp.timer.Stop()
	}
	for l := range n.hub.links {
		l.Close(peer.StatusGoingAway, "node shutting down")
	}
	n.mu.Unlock()
	n.life.cancel()
	done := make(chan struct{})
	go func() { n.life.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("relay: closing node: %w", ctx.Err())
	}
	if w != nil {
		if werr := w.Close(); werr != nil && err == nil {
			err = fmt.Errorf("relay: closing node: %w", werr)
		}
	}
	return err
}

// ServeHTTP accepts a downstream WebSocket link. It returns once the link
// is running, so that the HTTP request and its buffers can be freed; the
// link lives until it closes or the node does.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(meshNameHeader) != "" {
		n.mu.Lock()
		m := n.hub.mesh
		n.mu.Unlock()
		if m == nil {
			http.Error(w, "this node is not in a mesh", http.StatusNotFound)
			return
		}
		m.accept(w, r)
		return
	}
	var grant *auth.Grant
	if n.opts.Auth != nil {
		g, err := n.opts.Auth.Authenticate(auth.FromRequest(r))
		if err != nil {
			n.log.Info("refused a connection without a valid token", "remote", r.RemoteAddr, "err", err)
			http.Error(w, "a valid token is required (query parameter token, or Authorization: Bearer)", http.StatusUnauthorized)
			return
		}
		grant = g
	}
	release, ok := n.admitIP(w, r)
	if !ok {
		return
	}
	conn, err := peer.Accept(w, r, peer.AcceptOptions{OriginPatterns: n.opts.OriginPatterns})
	if err != nil {
		release()
		if origin := r.Header.Get("Origin"); origin != "" && strings.Contains(err.Error(), "Origin") {
			// A page elsewhere: its user sees only a failed connection,
			// so the operator is told (--origin admits it).
			n.log.Info("refused a page from a foreign origin (403); --origin admits it", "origin", origin, "remote", r.RemoteAddr)
			return
		}
		n.log.Debug("websocket accept failed", "err", err)
		return
	}
	l := n.attach(conn, ownership.Downstream, "", "")
	if l == nil {
		release()
	} else {
		n.mu.Lock()
		if ls := n.hub.links[l]; ls != nil {
			ls.release = release
		}
		n.mu.Unlock()
	}
	if l != nil && grant != nil {
		n.mu.Lock()
		if ls := n.hub.links[l]; ls != nil {
			ls.grant = grant
		}
		n.mu.Unlock()
	}
	n.goRun(l)
}

// ServeConn serves a link of the given kind over conn until it closes.
func (n *Node) ServeConn(conn peer.Conn, kind ownership.LinkKind) error {
	return n.run(n.attach(conn, kind, "", ""))
}

// serveMesh serves a mesh link to the member with the given name.
func (n *Node) serveMesh(conn peer.Conn, member, url string) error {
	return n.run(n.attach(conn, ownership.Mesh, url, member))
}

// goRun runs l on a goroutine of its own. The link is set up beforehand, on
// the caller's goroutine: the goroutine that then waits for the link's
// messages, for the link's whole life, keeps only a shallow stack.
func (n *Node) goRun(l *peer.Link) {
	if l != nil {
		go n.run(l) //nolint:errcheck // the link logs why it closed
	}
}

// run runs a link set up by attach until it closes.
func (n *Node) run(l *peer.Link) error {
	if l == nil {
		return ErrClosed
	}
	defer n.life.wg.Done()
	// Not n.life.ctx: Close closes every link itself, and a link registered with
	// the node's context would cost every idle connection a registration.
	return l.Run(context.Background())
}

// attach sets up a link of the given kind over conn and starts its
// handshake; run runs it. It returns nil, having closed conn, if the node
// is closed.
func (n *Node) attach(conn peer.Conn, kind ownership.LinkKind, remoteURL, member string) *peer.Link {
	n.mu.Lock()
	if n.life.closed {
		n.mu.Unlock()
		conn.Close(peer.StatusGoingAway, "node shutting down")
		return nil
	}
	n.hub.nextID++
	lopts := peer.LinkOptions{
		ID: n.hub.nextID, Kind: kind, Tick: n.opts.Tick,
		StallTimeout: n.opts.StallTimeout, PingInterval: n.opts.PingInterval,
		MaxFrameBytes: n.opts.MaxFrameBytes, Limits: n.opts.Limits,
		ReadRate: n.opts.ReadRate, ReadBurst: n.opts.ReadBurst,
		Logger: n.log, Workers: &n.life.workers, AwaitMetadata: true,
	}
	if kind == ownership.Downstream {
		lopts.MessageRate, lopts.RecordRate = n.opts.Quotas.MessagesPerSecond, n.opts.Quotas.RecordsPerSecond
	}
	if n.life.metrics != nil {
		lopts.Delivered = func(age time.Duration) { n.life.metrics.delivery.Observe(age.Seconds()) }
	}
	if kind != ownership.Upstream && n.opts.MetadataTimeout > 0 {
		lopts.MetadataTimeout = n.opts.MetadataTimeout
	}
	l := peer.NewLink(conn, (*wire)(n), lopts)
	ls := &linkState{link: l, kind: kind, chain: map[string]bool{}, remoteURL: remoteURL, member: member}
	n.hub.links[l] = ls
	n.hub.order = append(n.hub.order, ls)
	n.life.wg.Add(1)
	switch kind {
	case ownership.Upstream:
		// Introduce ourselves first so the upstream accepts our objects,
		// then offer them. Everything else is asked for once the upstream
		// has said who it is (see HandleMetadata).
		ls.ready = true
		ls.sweep = newSweep()
		l.SendMetadata(n.localMetadataLocked(kind))
		l.RequestMetadata()
		n.wantRefresh(ls)
	case ownership.Mesh:
		// Like a downstream link (ready once its chain is known), but we
		// introduce ourselves at once, and its refresh answer tells us
		// which of its objects went away while a previous link was down.
		ls.sweep = newSweep()
		l.SendMetadata(n.localMetadataLocked(kind))
		l.RequestMetadata()
	default:
		// requestRefresh follows the metadata answer, as the 2016 server
		// does: a refresh answer that overtook the metadata could not be
		// attributed to anyone and would be lost.
		l.RequestMetadata()
	}
	n.mu.Unlock()
	n.log.Debug("link opened", "link", l.ID(), "kind", kind.String(), "remote", conn.RemoteAddr())
	return l
}

// Apply applies changes to objects this node owns and routes them. Adds
// without an owner get the node's identifier; changes to objects owned by
// anyone else are refused.
func (n *Node) Apply(changes []gameworld.Change) (gameworld.Applied, error) {
	for i := range changes {
		if changes[i].Type == gameworld.Add && changes[i].Owner == "" {
			changes[i].Owner = n.id
		}
	}
	if err := compactProperties(changes); err != nil {
		return gameworld.Applied{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.life.closed {
		return gameworld.Applied{}, ErrClosed
	}
	res := n.world.Apply(changes, func(c gameworld.Change, existing *gameworld.Object) error {
		owner := c.Owner
		if existing != nil {
			owner = existing.Owner
		}
		if owner != n.id {
			return fmt.Errorf("object %s is owned by %s, not %s", c.ID, owner, n.id)
		}
		return n.validate(c, existing)
	})
	n.route(res.Records, nil)
	return res, nil
}

// compactProperties makes the changes' property values valid, compact JSON,
// as they are relayed as they are.
func compactProperties(changes []gameworld.Change) error {
	for i := range changes {
		if changes[i].Properties.Empty() {
			continue
		}
		var props gameworld.PropertiesBuilder
		var buf bytes.Buffer
		for k, v := range changes[i].Properties.All() {
			buf.Reset()
			if err := json.Compact(&buf, v); err != nil {
				return fmt.Errorf("relay: property %q of %s is not JSON: %w", k, changes[i].ID, err)
			}
			props.Add(k, buf.Bytes())
		}
		changes[i].Properties = props.Build()
	}
	return nil
}

// relation describes owner relative to the link ls. n.mu must be held.
func (n *Node) relation(ls *linkState, owner string) ownership.Owner {
	return n.ownerInfo(owner).relation(ls)
}

// ownerInfo is what routing needs to know about an owner, looked up once
// per record rather than once per link.
type ownerInfo struct {
	owner string
	claim *linkState
	local bool
	// dep is the departure of the owner's world, while it is leaving
	// (departures.go).
	dep *departure
}

func (n *Node) ownerInfo(owner string) ownerInfo {
	claim := n.hub.claims[owner]
	return ownerInfo{owner: owner, claim: claim, local: owner == n.id || (claim != nil && claim.kind == ownership.Downstream),
		dep: n.departingLocked(owner)}
}

func (oi ownerInfo) relation(ls *linkState) ownership.Owner {
	o := ownership.Owner{Local: oi.local}
	if ls.kind == ownership.Upstream {
		o.InLinkChain = ls.chain[oi.owner]
	} else {
		o.InLinkChain = oi.claim == ls
	}
	return o
}
