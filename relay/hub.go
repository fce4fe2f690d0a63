package relay

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/solipsism/mesh/antientropy"
	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/metrics"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// The hub: the registry of links and the accepting of new ones.

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
	totals metrics.Totals
	// bridged are the peers bridges serve (bridged.go).
	bridged bridgedSet
	// mesh is the mesh the node joined, if any (members.go).
	mesh Members
	// resumeSecret keys the resume tokens this node hands out.
	resumeSecret []byte
	// watchers follow the downstream peers (peerwatch.go).
	watchers []PeerWatcher
}

// The registry's own operations. Like all of hub, they are called with
// Node.mu held.

// add registers ls, the state of link l, last in accept order.
func (h *hub) add(l *peer.Link, ls *linkState) {
	h.links[l] = ls
	h.order = append(h.order, ls)
}

// remove unregisters link l and returns its state, or nil if it was not
// registered.
func (h *hub) remove(l *peer.Link) *linkState {
	ls := h.links[l]
	if ls == nil {
		return nil
	}
	delete(h.links, l)
	if i := slices.Index(h.order, ls); i >= 0 {
		h.order = append(h.order[:i:i], h.order[i+1:]...)
	}
	return ls
}

// claimedBy returns the worlds ls claims now.
func (h *hub) claimedBy(ls *linkState) []string {
	var owned []string
	for id := range ls.chain {
		if h.claims[id] == ls {
			owned = append(owned, id)
		}
	}
	return owned
}

// clients calls fn for each live downstream link.
func (h *hub) clients(fn func(*linkState)) {
	for _, ls := range h.order {
		if ls.kind == ownership.Downstream && ls.link != nil && !ls.detached {
			fn(ls)
		}
	}
}

// downstream calls fn with every downstream peer whose wants count
// (ready links and attachments with a receiver), until fn returns false,
// and reports whether none did.
func (h *hub) downstream(fn func(*linkState) bool) bool {
	for _, ls := range h.order {
		// A peer that has not said who it is wants nothing yet: its
		// region (or lack of one) counts once its metadata arrives.
		if ls.kind == ownership.Downstream && ls.ready && !fn(ls) {
			return false
		}
	}
	for _, a := range h.atts {
		if a.rx != nil && !fn(a.ls) {
			return false
		}
	}
	return true
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
	digest antientropy.Link
	// prio is what the link is owed under priority with a budget
	// (priority.go); nil when it does not apply. sched is set while the
	// link takes far updates on the node's shared schedule instead
	// (priority without a budget).
	prio  *priority.Plan
	sched bool
}

// ServeHTTP accepts a downstream WebSocket link. It returns once the link
// is running, so that the HTTP request and its buffers can be freed; the
// link lives until it closes or the node does.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(MeshNameHeader) != "" {
		m := n.members()
		if m == nil {
			http.Error(w, "this node is not in a mesh", http.StatusNotFound)
			return
		}
		m.Accept(w, r)
		return
	}
	// A page of an origin the node admits may read why it is refused
	// (solipsism.js asks over HTTP after a failed handshake).
	peer.AllowOrigin(w, r, n.opts.OriginPatterns)
	if n.refuseDraining(w) {
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
		n.lock()
		if ls := n.hub.links[l]; ls != nil {
			ls.release = release
		}
		n.mu.Unlock()
	}
	if l != nil && grant != nil {
		n.lock()
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
	n.lock()
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
		lopts.Delivered = n.life.metrics.Delivered
	}
	if kind != ownership.Upstream && n.opts.MetadataTimeout > 0 {
		lopts.MetadataTimeout = n.opts.MetadataTimeout
	}
	l := peer.NewLink(conn, (*wire)(n), lopts)
	ls := &linkState{link: l, kind: kind, chain: map[string]bool{}, remoteURL: remoteURL, member: member}
	n.hub.add(l, ls)
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
