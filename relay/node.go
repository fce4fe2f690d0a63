package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
type Node struct {
	opts  Options
	role  ownership.Role
	id    string
	log   *slog.Logger
	world *gameworld.World

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time

	mu     sync.Mutex
	closed bool
	links  map[*peer.Link]*linkState
	order  []*linkState // links in accept order, for routing without map iteration
	atts   []*Attachment
	// claims maps a world identifier to the downstream or mesh link whose
	// identifierChain holds it.
	claims map[string]*linkState
	nextID uint64
	totals closedTotals
	mesh   *Mesh
	fan    fanout
	sp     spatial
	// interest is what a client node wants of its upstream (SetInterest);
	// nil means everything.
	interest []peer.Box
	// resumeSecret keys the resume tokens this node hands out; tokens
	// holds those its upstream handed it.
	resumeSecret []byte
	tokens       map[string]string
	// owned counts objects per owner, for Quotas.ObjectsPerOwner; perIP
	// counts downstream connections per address.
	owned map[string]int
	// batchAdds counts the adds a batch being applied has let in so far,
	// per owner (quota.go).
	batchAdds map[string]int
	perIP     map[string]int
	// asked are the transfer requests waiting for the upstream's answer,
	// and held the answers a mesh server holds for its members'
	// acknowledgements, by object (answers.go).
	asked map[string]*upRequests
	held  map[string]*held
	// bridged are the peers bridges serve (bridged.go).
	bridged bridgedSet
	// upstream is what RunUpstream knows of the upstream (ready.go).
	upstream upstreamState
	// persist keeps durable objects in Options.Store (persist.go); nil
	// without one, and once closing. persistStats stays for metrics.
	persist, persistStats *persist
	// workers run the links' writers and message handling.
	workers peer.Workers
	// metrics is nil unless Options.Registerer is set.
	metrics *nodeMetrics
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
	// grant is what the peer's token allows; nil when authentication is
	// off (or for upstream and mesh links).
	grant *auth.Grant
	// release frees the link's place in the per-address count.
	release func()
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
	if opts.ReclaimGrace == 0 {
		opts.ReclaimGrace = DefaultReclaimGrace
	}
	opts.Quotas.defaults()
	if opts.InterestProperty == "" {
		opts.InterestProperty = DefaultInterestProperty
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
		resumeSecret: secret,
		opts:         opts, role: opts.Role, id: opts.Identifier,
		log:     log.With("node", opts.Identifier),
		world:   gameworld.New(opts.Identifier),
		ctx:     ctx,
		cancel:  cancel,
		links:   make(map[*peer.Link]*linkState),
		claims:  make(map[string]*linkState),
		started: time.Now(),
	}
	if opts.Store != nil {
		n.openStoreLocked(opts.Store, stored)
		n.persistStats = n.persist
	}
	if opts.Registerer != nil {
		n.metrics = newNodeMetrics(n.role.String())
		for _, c := range []prometheus.Collector{newCollector(n), n.metrics.tick, n.metrics.delivery, n.metrics.limited} {
			if err := opts.Registerer.Register(c); err != nil {
				cancel()
				return nil, fmt.Errorf("relay: registering metrics: %w", err)
			}
		}
	}
	if opts.Tick != peer.Immediate {
		n.wg.Add(1)
		go n.tickLoop()
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
	n.closed = true
	for l := range n.links {
		l.Close(peer.StatusGoingAway, "node shutting down")
	}
	n.mu.Unlock()
	n.cancel()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
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
		m := n.mesh
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
		n.log.Debug("websocket accept failed", "err", err)
		return
	}
	l := n.attach(conn, ownership.Downstream, "", "")
	if l == nil {
		release()
	} else {
		n.mu.Lock()
		if ls := n.links[l]; ls != nil {
			ls.release = release
		}
		n.mu.Unlock()
	}
	if l != nil && grant != nil {
		n.mu.Lock()
		if ls := n.links[l]; ls != nil {
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
	defer n.wg.Done()
	// Not n.ctx: Close closes every link itself, and a link registered with
	// the node's context would cost every idle connection a registration.
	return l.Run(context.Background())
}

// attach sets up a link of the given kind over conn and starts its
// handshake; run runs it. It returns nil, having closed conn, if the node
// is closed.
func (n *Node) attach(conn peer.Conn, kind ownership.LinkKind, remoteURL, member string) *peer.Link {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		conn.Close(peer.StatusGoingAway, "node shutting down")
		return nil
	}
	n.nextID++
	lopts := peer.LinkOptions{
		ID: n.nextID, Kind: kind, Tick: n.opts.Tick,
		StallTimeout: n.opts.StallTimeout, PingInterval: n.opts.PingInterval,
		MaxFrameBytes: n.opts.MaxFrameBytes, Limits: n.opts.Limits,
		ReadRate: n.opts.ReadRate, ReadBurst: n.opts.ReadBurst,
		Logger: n.log, Workers: &n.workers,
	}
	if kind == ownership.Downstream {
		lopts.MessageRate, lopts.RecordRate = n.opts.Quotas.MessagesPerSecond, n.opts.Quotas.RecordsPerSecond
	}
	if n.metrics != nil {
		lopts.Delivered = func(age time.Duration) { n.metrics.delivery.Observe(age.Seconds()) }
	}
	if kind != ownership.Upstream && n.opts.MetadataTimeout > 0 {
		lopts.MetadataTimeout = n.opts.MetadataTimeout
	}
	l := peer.NewLink(conn, n, lopts)
	ls := &linkState{link: l, kind: kind, chain: map[string]bool{}, remoteURL: remoteURL, member: member}
	n.links[l] = ls
	n.order = append(n.order, ls)
	n.wg.Add(1)
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
	if n.closed {
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
		return nil
	})
	n.route(res.Records, nil)
	return res, nil
}

// compactProperties makes the changes' property values valid, compact JSON,
// as they are relayed as they are. Each change gets a map of its own: the
// caller's is left alone.
func compactProperties(changes []gameworld.Change) error {
	for i := range changes {
		if len(changes[i].Properties) == 0 {
			continue
		}
		props := make(gameworld.Properties, len(changes[i].Properties))
		for k, v := range changes[i].Properties {
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err != nil {
				return fmt.Errorf("relay: property %q of %s is not JSON: %w", k, changes[i].ID, err)
			}
			props[k] = buf.Bytes()
		}
		changes[i].Properties = props
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
}

func (n *Node) ownerInfo(owner string) ownerInfo {
	claim := n.claims[owner]
	return ownerInfo{owner: owner, claim: claim, local: owner == n.id || (claim != nil && claim.kind == ownership.Downstream)}
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

// HandleWorldChange implements peer.Handler.
func (n *Node) HandleWorldChange(l *peer.Link, wc peer.WorldChange) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.links[l]
	if ls == nil || n.closed {
		return
	}
	if !ls.ready {
		// Without metadata we cannot tell whose objects these are. The
		// refresh we asked for right after metadata brings them again.
		l.Stats().Refused.Add(uint64(len(wc.Changes)))
		n.log.Debug("refusing changes before metadata", "link", l.ID(), "records", len(wc.Changes))
		return
	}
	var peerID string
	if md, ok := l.Metadata(); ok {
		peerID = md.Identifier
	}
	for i := range wc.Changes {
		if wc.Changes[i].Owner == "" && wc.Changes[i].Type == gameworld.Add {
			wc.Changes[i].Owner = peerID
		}
	}
	var requests map[string]bool
	var answered []gameworld.Change
	switch ls.kind {
	case ownership.Downstream:
		wc.Changes, requests = n.takeRequestsLocked(ls, wc.Changes)
	case ownership.Upstream, ownership.Mesh:
		wc.Changes, answered = n.takeAnswersLocked(ls, wc.Changes)
	}
	res := n.world.Apply(wc.Changes, func(c gameworld.Change, existing *gameworld.Object) error {
		return n.authorize(ls, ls.kind, c, existing)
	})
	for _, rf := range res.Refused {
		if errors.Is(rf.Err, gameworld.ErrUnknownObject) {
			l.Stats().Ignored.Add(1)
			continue
		}
		l.Stats().Refused.Add(1)
		n.log.Debug("refused write", "link", l.ID(), "type", rf.Change.Type.String(), "id", rf.Change.ID, "owner", rf.Change.Owner, "err", rf.Err)
	}
	// The peer knows what it sent us (Echo), so a later remove may be
	// relayed to it.
	n.route(res.Records, ls)
	switch ls.kind {
	case ownership.Downstream:
		// A refused claim from a proxy is answered too: the proxy takes
		// our word over its own.
		for _, rf := range res.Refused {
			if rf.Change.Type == gameworld.Transfer {
				if requests == nil {
					requests = map[string]bool{}
				}
				requests[rf.Change.ID] = true
			}
		}
		n.answerTransfers(ls, requests, res.Records)
	case ownership.Upstream:
		for _, c := range answered {
			n.answeredLocked(c.ID)
		}
	case ownership.Mesh:
		n.acknowledgeLocked(ls, wc.Changes, answered)
	}
	if ls.sweep != nil {
		ls.sweep.see(wc.Changes)
		switch {
		case wc.Refreshed:
			n.finishSweep(ls)
		case time.Now().After(ls.sweep.deadline) && ls.kind == ownership.Downstream:
			// A 2016 peer marks nothing, but it sends its whole world with
			// every flush: what it has not sent by now, it no longer has.
			n.finishSweep(ls)
		case time.Now().After(ls.sweep.deadline):
			n.log.Info("upstream never marked its refresh answer complete; keeping objects learned before the reconnect")
			ls.sweep = nil
		}
	}
}

// HandleRequestRefresh implements peer.Handler.
func (n *Node) HandleRequestRefresh(l *peer.Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.links[l]
	if ls == nil {
		return
	}
	if !ls.ready {
		ls.refreshPending = true
		return
	}
	n.wantRefresh(ls)
}

// HandleMetadata implements peer.Handler.
func (n *Node) HandleMetadata(l *peer.Link, md peer.Metadata) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.links[l]
	if ls == nil || n.closed {
		return
	}
	if ls.kind == ownership.Upstream {
		n.keepTokensLocked(md)
		ls.chain = make(map[string]bool, len(md.IdentifierChain))
		for _, id := range md.IdentifierChain {
			ls.chain[id] = true
		}
		if !ls.askedRefresh {
			ls.askedRefresh = true
			l.RequestRefresh()
			n.resendRequestsLocked(md)
		}
		return
	}
	next := make(map[string]bool, len(md.IdentifierChain))
	for _, id := range md.IdentifierChain {
		if id == n.id {
			l.Close(peer.StatusPolicy, "identifierChain claims this node's identifier")
			return
		}
		next[id] = true
	}
	for _, id := range md.IdentifierChain {
		if ls.kind == ownership.Downstream && !ls.grant.Allows(id) {
			n.log.Info("refused a claim its token does not grant", "identifier", id, "link", l.ID())
			n.limited("unauthorized")
			l.Close(peer.StatusUnauthorized, "the token does not grant identifier "+id)
			return
		}
	}
	if id := n.refusedClaim(ls, md); id != "" {
		n.log.Info("refused a claim to an identifier held by another connection", "identifier", id, "link", l.ID())
		n.limited("identity_taken")
		l.Close(peer.StatusIdentityTaken, "identifier "+id+" is held by another connection; present its resume token")
		return
	}
	changed := false
	gained := false
	var gone []string
	for id := range ls.chain {
		if !next[id] {
			gone = append(gone, id)
		}
	}
	for id := range next {
		if ls.chain[id] {
			continue
		}
		other := n.claims[id]
		if ls.kind == ownership.Mesh && other != nil && other.kind == ownership.Downstream || other != nil && other.att != nil {
			// A client connected here speaks for itself; a mesh peer's
			// stale view of it does not override that. Nor does anyone
			// take over an attached peer's identifier: it is live until it
			// detaches.
			continue
		}
		changed = true
		if other != nil && other != ls {
			// The newest claim wins: a reconnecting peer takes over its
			// identifiers (and objects) from a connection not yet timed out,
			// or dropped within the grace period. Its refresh answer then
			// tells which of those objects it no longer has.
			if other.detached && ls.kind == ownership.Downstream {
				if ls.sweep == nil {
					ls.sweep = newSweep()
				}
				ls.sweep.claim(id)
			}
			delete(other.chain, id)
			if other.link == nil {
				// Held since a restart (persist.go).
				n.log.Info("identifier reclaimed after a restart", "identifier", id, "link", l.ID())
			} else {
				if omd, _ := other.link.Metadata(); omd.Identifier == id {
					other.link.Close(peer.StatusReplaced, "identifier claimed by a newer connection")
				}
				n.log.Info("identifier moved to newer link", "identifier", id, "from", other.link.ID(), "to", l.ID())
			}
		}
		n.claims[id] = ls
		ls.chain[id] = true
		gained = true
	}
	if len(gone) > 0 {
		changed = true
		// The peer node that held them gives their persistent objects to
		// itself; we make the same claim.
		n.releaseClaimsTo(gone, ls, md.Identifier)
		for _, id := range gone {
			delete(ls.chain, id)
		}
	}
	if n.interestChangedLocked(ls, md) {
		changed = true // the union announced upstream and to the mesh
	}
	if gained {
		n.sendTokensLocked(ls)
	}
	first := !ls.ready
	ls.ready = true
	if first {
		l.RequestRefresh()
	}
	if first && ls.kind == ownership.Mesh {
		n.releaseGhosts(ls)
	}
	if first || ls.refreshPending {
		ls.refreshPending = false
		n.wantRefresh(ls)
	}
	if changed {
		n.chainChanged()
	}
}

// releaseClaims removes every object owned by one of the worlds ids, routes
// the removals, then drops the worlds' claims. The removals come first, while
// the claims still make them local, so that they also go upstream and to mesh
// peers. from, if not nil, is a link whose peer removed them itself. n.mu
// must be held.
func (n *Node) releaseClaims(ids []string, from *linkState) {
	n.releaseClaimsTo(ids, from, n.id)
}

// releaseClaimsTo is releaseClaims with the heir of persistent objects:
// this node, or the peer node that held the departed worlds (it gives them
// the same claim, so both agree). n.mu must be held.
func (n *Node) releaseClaimsTo(ids []string, from *linkState, heir string) {
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	// Persistent objects outlive their owner: they fall to this node.
	kept := n.keepPersistentLocked(set, heir)
	removed := n.removeWhere(func(o gameworld.Object) bool { return set[o.Owner] && !kept[o.ID] }, from)
	for _, id := range ids {
		delete(n.claims, id)
	}
	if removed > 0 {
		n.log.Debug("removed objects of departed worlds", "worlds", len(ids), "objects", removed)
	}
}

// removeWhere removes every object for which remove is true and routes the
// removals; it returns how many it removed. from, if not nil, is a link
// whose peer removed them itself. n.mu must be held.
func (n *Node) removeWhere(remove func(gameworld.Object) bool, from *linkState) int {
	var changes []gameworld.Change
	n.world.Range(func(o gameworld.Object) bool {
		if remove(o) {
			changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: o.ID})
		}
		return true
	})
	if len(changes) == 0 {
		return 0
	}
	res := n.world.Apply(changes, nil)
	n.route(res.Records, from)
	return len(res.Records)
}

// LocalMetadata implements peer.Handler: toward upstream and mesh links a
// node advertises itself and every world behind its downstream links.
func (n *Node) LocalMetadata(l *peer.Link) peer.Metadata {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ls := n.links[l]; ls != nil && ls.kind == ownership.Downstream {
		return n.tokenMetadataLocked(ls)
	}
	return n.localMetadataLocked(l.Kind())
}

// localMetadataLocked is LocalMetadata for a link of the given kind. n.mu
// must be held.
func (n *Node) localMetadataLocked(kind ownership.LinkKind) peer.Metadata {
	md := peer.Metadata{Identifier: n.id, IdentifierChain: []string{n.id}, Role: n.role.String(), Features: []string{peer.FeatureOwnership}}
	if kind == ownership.Downstream {
		return md
	}
	if kind == ownership.Upstream && len(n.tokens) > 0 {
		// A copy: the link encodes it later, while an upstream's next
		// metadata may add tokens to n.tokens.
		md.ResumeTokens = maps.Clone(n.tokens)
	}
	switch {
	case kind == ownership.Upstream && n.opts.Interest != nil:
		md.Interest, md.HasInterest = n.opts.Interest, true
	case n.role == ownership.Client:
		md.Interest, md.HasInterest = n.interest, n.interest != nil
	default:
		md.Interest, md.HasInterest = n.unionInterestLocked()
	}
	for id, ls := range n.claims {
		if ls.kind == ownership.Downstream {
			md.IdentifierChain = append(md.IdentifierChain, id)
		}
	}
	sort.Strings(md.IdentifierChain[1:])
	return md
}

// HandleClose implements peer.Handler.
func (n *Node) HandleClose(l *peer.Link, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.links[l]
	if ls == nil {
		return
	}
	delete(n.links, l)
	if ls.release != nil {
		go ls.release() // takes n.mu
	}
	for i, o := range n.order {
		if o == ls {
			n.order = append(n.order[:i:i], n.order[i+1:]...)
			break
		}
	}
	if ls.region != nil {
		n.unregisterLocked(ls)
		ls.region = nil
		if len(n.sp.regioned) == 0 {
			n.sp = spatial{}
		}
		if !n.closed {
			n.chainChanged()
		}
	}
	n.totals.add(l)
	n.forgetAskerLocked(ls)
	if ls.kind == ownership.Upstream {
		n.requestsLostLocked()
		// Keep what the upstream told us: on reconnect a refresh brings
		// it up to date, and downstream clients see no gap.
		return
	}
	if ls.kind == ownership.Mesh && n.mesh != nil && !n.closed && n.mesh.alive(ls.member) {
		// memberlist still sees the member: keep its objects for the
		// re-dialed link instead of removing and re-adding them all.
		ls.detached = true
		n.log.Info("mesh link lost; keeping the member's objects until it reconnects or is declared dead", "member", ls.member)
		return
	}
	owned := n.claimedBy(ls)
	if len(owned) > 0 && ls.kind == ownership.Downstream && n.opts.ReclaimGrace > 0 && !n.closed && droppedAbnormally(err) {
		// The connection broke rather than closed: keep the peer's
		// objects for a while, so that a flapping link (a proxy whose
		// upstream connection drops and comes back) does not make them
		// vanish and reappear for everyone. A reconnecting link that
		// claims the identifiers takes them over.
		ls.detached = true
		time.AfterFunc(n.opts.ReclaimGrace, func() { n.expireDetached(ls) })
		n.log.Info("link dropped; keeping its objects for the reclaim grace period", "link", l.ID(), "worlds", len(owned), "grace", n.opts.ReclaimGrace, "err", err)
		return
	}
	if len(owned) > 0 {
		n.releaseClaims(owned, nil)
		if !n.closed {
			n.chainChanged()
		}
	}
	n.log.Debug("link closed", "link", l.ID(), "worlds", len(owned), "err", err)
}

// claimedBy returns the identifiers that ls still claims. n.mu must be held.
func (n *Node) claimedBy(ls *linkState) []string {
	var owned []string
	for id := range ls.chain {
		if n.claims[id] == ls {
			owned = append(owned, id)
		}
	}
	return owned
}

// expireDetached removes what a dropped downstream link still claims once
// its grace period is over and nobody took it over.
func (n *Node) expireDetached(ls *linkState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if owned := n.claimedBy(ls); len(owned) > 0 {
		n.log.Info("reclaim grace period over; removing the dropped link's objects", "worlds", len(owned))
		n.releaseClaims(owned, nil)
		n.chainChanged()
	}
}

// droppedAbnormally reports whether a link's close looks like a broken
// connection (no close frame, a stall, a failed keepalive, an error close)
// rather than a peer leaving (a normal or going-away close frame) or being
// sent away for bad input.
func droppedAbnormally(err error) bool {
	var de *peer.DecodeError
	if errors.As(err, &de) {
		return false
	}
	var ce *peer.CloseError
	if errors.As(err, &ce) {
		if ce.Remote {
			return ce.Code != peer.StatusNormal && ce.Code != peer.StatusGoingAway
		}
		return ce.Code == peer.StatusStalled || ce.Code == peer.StatusGoingAway
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// releaseGhosts drops what detached links of ls's member still claim and
// the new link did not: worlds that left that member while we were cut off.
// n.mu must be held.
func (n *Node) releaseGhosts(ls *linkState) {
	var stale []string
	for id, cl := range n.claims {
		if cl != ls && cl.detached && cl.member == ls.member {
			stale = append(stale, id)
		}
	}
	n.releaseClaims(stale, nil)
}

// meshMemberGone removes everything owned behind a member that memberlist
// declared dead or that left, and closes any link to it.
func (n *Node) meshMemberGone(member string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var owned []string
	for id, cl := range n.claims {
		if cl.kind == ownership.Mesh && cl.member == member {
			owned = append(owned, id)
		}
	}
	n.releaseClaims(owned, nil)
	for _, ls := range n.order {
		if ls.kind == ownership.Mesh && ls.member == member {
			ls.link.Close(peer.StatusGoingAway, "member left the mesh")
		}
	}
	if len(owned) > 0 {
		n.log.Info("removed the objects of a departed mesh member", "member", member, "worlds", len(owned))
	}
}

// MeshStatus returns the node's mesh status, or nil when it is not in one.
func (n *Node) MeshStatus() *MeshStatus {
	n.mu.Lock()
	m := n.mesh
	n.mu.Unlock()
	if m == nil {
		return nil
	}
	st := m.Status()
	return &st
}
