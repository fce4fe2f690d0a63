package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/metrics"
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
	metrics *metrics.Recorder
	// persist keeps durable objects in Options.Store (persist.go); nil
	// without one, and once closing. persistStats stays for metrics.
	persist, persistStats *persist
	// draining is set by Drain: no new client is taken.
	draining atomic.Bool
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
	opts.Quotas.Defaults()
	if opts.Priority.Bands <= 0 {
		opts.Priority.Bands = 4
	}
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
		hub:   hub{links: make(map[*peer.Link]*linkState), claims: make(map[string]*linkState), resumeSecret: secret, watchers: peerWatchers(opts)},
		fan:   fanout{kick: make(chan struct{}, 1)},
		deps:  departures{departing: make(map[string]*departure)},
		sp: space{Space: interest.Space[*linkState]{Props: interest.Props{Position: opts.InterestProperty, Room: opts.RoomProperty},
			Grid: interest.Grid{Size: opts.InterestCell}, Margin: opts.InterestMargin}},
		// A burst as large as the largest world a digest may cover.
		dig: digests{budget: rate.NewLimiter(digestVisitsPerSecond, 10_000_000)},
	}
	if opts.Store != nil {
		n.openStoreLocked(opts.Store, stored)
		n.life.persistStats = n.life.persist
	}
	if opts.Registerer != nil {
		n.life.metrics = metrics.NewRecorder(n.role.String())
		for _, c := range append(n.life.metrics.Collectors(), metrics.NewCollector(n.role.String(), metricsSource{n})) {
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
	n.life.wg.Add(1)
	go n.digestLoop() // with digests off, it still answers deferred repairs
	return n, nil
}

// Identifier returns the node's world identifier.
func (n *Node) Identifier() string { return n.id }

// Logger returns the node's logger (Options.Logger, naming the node).
func (n *Node) Logger() *slog.Logger { return n.log }

// Role returns the node's role.
func (n *Node) Role() ownership.Role { return n.role }

// World returns the node's world. Read it freely; change it only through
// the Node (Apply), which routes the changes.
func (n *Node) World() *gameworld.World { return n.world }

// Close closes every link and waits for them to finish, or for ctx.
func (n *Node) Close(ctx context.Context) error {
	n.lock()
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

// Apply applies changes to objects this node owns and routes them. Adds
// without an owner get the node's identifier; changes to objects owned by
// anyone else are refused.
func (n *Node) Apply(changes []gameworld.Change) (gameworld.Applied, error) {
	if err := ownChanges(changes, n.id); err != nil {
		return gameworld.Applied{}, err
	}
	n.lock()
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

// ownChanges readies changes made through the API by owner: adds without
// an owner get it, and property values are made valid, compact JSON, as
// they are relayed as they are.
func ownChanges(changes []gameworld.Change, owner string) error {
	for i := range changes {
		if changes[i].Type == gameworld.Add && changes[i].Owner == "" {
			changes[i].Owner = owner
		}
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
