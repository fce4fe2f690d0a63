package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/solipsism/mesh/membership"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// AuthHeader is the header in which a mesh link's dialer proves its name
// (relay.MeshNameHeader) when the mesh has a secret.
const AuthHeader = "Solipsism-Mesh-Auth"

// A Mesh is the node's Members, and memberlist's events reach it.
var (
	_ relay.Members     = (*Mesh)(nil)
	_ membership.Events = (*Mesh)(nil)
)

// Options configures Join. BindAddr and AdvertiseURL are required; the
// zero value of every other field means its default.
type Options struct {
	// BindAddr is the host:port memberlist listens on (UDP and TCP). Port 0
	// picks a free port.
	BindAddr string
	// AdvertiseURL is the ws:// or wss:// URL of this node's /ws that other
	// nodes dial.
	AdvertiseURL string
	// Join lists host:port addresses of existing members. Empty starts a new
	// mesh.
	Join []string
	// SecretKey (16, 24 or 32 bytes) encrypts and authenticates gossip and
	// authenticates mesh links. Nil means none.
	SecretKey []byte
	// Label keeps separate meshes apart: members only talk to members with
	// the same label.
	Label string
	// Profile picks memberlist's timing: "lan" (default), "local" (fast
	// failure detection, for one machine) or "wan".
	Profile string
	// ProbeInterval, if positive, overrides the profile's failure-detector
	// probe interval.
	ProbeInterval time.Duration
	// MinBackoff and MaxBackoff bound mesh link re-dials. Zero means 100 ms
	// and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// JoinRetry is how often a failed join is retried. Zero means 5 s.
	JoinRetry time.Duration
	// Dial configures the WebSocket handshake of mesh links.
	Dial peer.DialOptions
}

// Mesh joins a server node to other server nodes. Membership and failure
// detection come from package membership (hashicorp/memberlist); the data
// flows over one WebSocket link per pair of members, dialed by the member
// whose name sorts first.
type Mesh struct {
	n       *relay.Node
	opts    Options
	log     *slog.Logger
	ms      *membership.Membership
	started chan struct{} // closed once ms is set
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	dials map[string]context.CancelFunc // our dial loops, by member name
}

// Join starts memberlist for n, joins opts.Join (retrying in the
// background if that fails) and keeps one link to every other member. n
// must be a server; logs go to its logger (opts.Logger, if set).
func Join(n *relay.Node, opts Options) (*Mesh, error) {
	if n.Role() != ownership.Server {
		return nil, errors.New("cluster: only server nodes join a mesh")
	}
	if opts.AdvertiseURL == "" {
		return nil, errors.New("cluster: mesh needs an advertise URL")
	}
	if n.MeshStatus() != nil {
		return nil, errors.New("cluster: the node is in a mesh already")
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := n.Logger()
	m := &Mesh{n: n, opts: opts, log: log, started: make(chan struct{}), ctx: ctx, cancel: cancel, dials: map[string]context.CancelFunc{}}
	ms, err := membership.Start(membership.Options{BindAddr: opts.BindAddr, ID: n.Identifier(), URL: opts.AdvertiseURL, Join: opts.Join,
		SecretKey: opts.SecretKey, Label: opts.Label, Profile: opts.Profile, ProbeInterval: opts.ProbeInterval, JoinRetry: opts.JoinRetry,
		Events: m, Logger: log})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	m.ms, m.log = ms, log.With("mesh", ms.Name())
	close(m.started)
	if err := n.SetMembers(m); err != nil {
		// (In a mesh already: checked before too, but another Join may
		// have won since.)
		ms.Kill()
		m.stopLoops()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	m.log.Info("mesh started", "bind", ms.Addr(), "advertise", opts.AdvertiseURL, "encrypted", len(opts.SecretKey) > 0, "label", opts.Label)
	if len(opts.SecretKey) == 0 {
		m.log.Warn("the mesh runs unencrypted and unauthenticated: anyone who reaches the mesh port can join and write; set a mesh secret (--mesh-secret)")
	}
	return m, nil
}

// Addr returns the host:port memberlist listens on, for others to join.
func (m *Mesh) Addr() string { return m.ms.Addr() }

// Name returns this member's memberlist name.
func (m *Mesh) Name() string { return m.ms.Name() }

// Close leaves the mesh gracefully (saying so, for the others to adopt
// what this node owned itself) and closes the mesh links.
func (m *Mesh) Close() error {
	if m.ms.Stopped() {
		return nil
	}
	err := m.ms.Leave()
	m.stopLoops()
	m.n.CloseMeshLinks("leaving the mesh")
	return err
}

// Kill stops memberlist without leaving, as a crash would: the others
// find out through failure detection. The node's mesh links stay up until
// they notice. For tests of failures.
func (m *Mesh) Kill() {
	m.ms.Kill()
	m.stopLoops()
}

func (m *Mesh) stopLoops() {
	m.cancel()
	m.wg.Wait()
}

// MemberUp implements membership.Events: the member whose name sorts first
// dials.
func (m *Mesh) MemberUp(mem membership.Member) {
	<-m.started
	m.mu.Lock()
	defer m.mu.Unlock()
	if cancel := m.dials[mem.Name]; cancel != nil {
		cancel()
		delete(m.dials, mem.Name)
	}
	if m.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.dials[mem.Name] = cancel
	m.wg.Add(1)
	if m.ms.Name() < mem.Name {
		go m.dialLoop(ctx, mem)
	} else {
		go m.awaitDial(ctx, mem)
	}
}

// awaitDial makes sure a member whose name sorts first, and so dials us,
// hears of us: while no link with it is up, it pushes our view of the
// mesh to it now and then. Gossip of a newcomer may miss a member (its
// retransmits spent on others, or on one that died), which would then
// learn of us only at its next full sync, tens of seconds later.
func (m *Mesh) awaitDial(ctx context.Context, mem membership.Member) {
	defer m.wg.Done()
	for d := time.Second; ; d = min(2*d, 10*time.Second) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		if m.linked(mem.Name) {
			continue
		}
		if err := m.ms.Sync(mem.Addr); err != nil {
			m.log.Debug("membership sync failed", "member", mem.Name, "err", err)
		}
	}
}

// linked reports whether a mesh link with member name is up.
func (m *Mesh) linked(name string) bool { return m.n.MeshLinks()[name] }

// MemberDown implements membership.Events.
func (m *Mesh) MemberDown(mem membership.Member) {
	<-m.started
	m.mu.Lock()
	if cancel := m.dials[mem.Name]; cancel != nil {
		cancel()
		delete(m.dials, mem.Name)
	}
	m.mu.Unlock()
	if mem.Leaving {
		// It stopped on purpose (a drain, an upgrade): what it owned
		// itself goes on at a member, as it would have handed it over:
		// the lowest identifier of the membership, which every survivor
		// sees alike (the links, not yet all up, might not).
		heir := m.n.Identifier()
		for _, o := range m.ms.Members() {
			if o.ID != mem.ID && !o.Leaving && o.ID < heir {
				heir = o.ID
			}
		}
		m.n.MemberLeft(mem.ID, heir)
	}
	m.n.MemberGone(mem.Name)
}

// Leaving implements relay.Members: whether this node has left the mesh
// (Close).
func (m *Mesh) Leaving() bool { return m.ms.Stopped() }

// Alive implements relay.Members: whether memberlist still counts name as
// a member.
func (m *Mesh) Alive(name string) bool { return m.ms.Alive(name) }

// Auth returns the credential member name proves itself with (empty
// without a secret).
func (m *Mesh) Auth(name string) string { return m.ms.Auth(name) }

// NumMembers is how many members memberlist counts, this one included.
func (m *Mesh) NumMembers() int { return m.ms.NumMembers() }

// dialLoop keeps a link to mem open while it is a member.
func (m *Mesh) dialLoop(ctx context.Context, mem membership.Member) {
	defer m.wg.Done()
	failures := 0
	for ctx.Err() == nil {
		dopts := m.opts.Dial
		dopts.Header = http.Header{}
		for k, v := range m.opts.Dial.Header {
			dopts.Header[k] = v
		}
		dopts.Header.Set(relay.MeshNameHeader, m.ms.Name())
		if a := m.ms.Auth(m.ms.Name()); a != "" {
			dopts.Header.Set(AuthHeader, a)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := peer.Dial(dctx, mem.URL, dopts)
		cancel()
		if err == nil {
			start := time.Now()
			stop := context.AfterFunc(ctx, func() { conn.Close(peer.StatusGoingAway, "member left the mesh") })
			err = m.n.ServeMesh(conn, mem.Name, mem.URL)
			stop()
			if time.Since(start) >= stableAfter {
				failures = 0 // a link that died at once keeps backing off
			}
			m.log.Debug("mesh link closed", "member", mem.Name, "err", err)
		} else {
			m.log.Debug("mesh dial failed", "member", mem.Name, "url", mem.URL, "err", err)
			var he *peer.HandshakeError
			if errors.As(err, &he) && he.StatusCode == http.StatusServiceUnavailable && failures%4 == 1 {
				// It does not know us yet: gossip has not reached it. A
				// push/pull with it merges our view of the mesh into its.
				if err := m.ms.Sync(mem.Addr); err != nil {
					m.log.Debug("membership sync failed", "member", mem.Name, "err", err)
				}
			}
		}
		d := peer.Backoff(failures, m.opts.MinBackoff, m.opts.MaxBackoff)
		failures++
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// stableAfter is how long a mesh link must last for its re-dial backoff
// to start over.
const stableAfter = 10 * time.Second

// Accept implements relay.Members: it serves an incoming mesh link after
// checking who dials.
func (m *Mesh) Accept(w http.ResponseWriter, r *http.Request) {
	name := r.Header.Get(relay.MeshNameHeader)
	if !m.ms.Verify(name, r.Header.Get(AuthHeader)) {
		m.log.Warn("refused mesh link with bad authentication", "member", name, "remote", r.RemoteAddr)
		http.Error(w, "mesh link authentication failed", http.StatusForbidden)
		return
	}
	if !m.Alive(name) {
		// Gossip may not have told us about the dialer yet; it retries.
		http.Error(w, "not a member of this mesh (yet)", http.StatusServiceUnavailable)
		return
	}
	conn, err := peer.Accept(w, r, peer.AcceptOptions{})
	if err != nil {
		return
	}
	m.n.AcceptMesh(conn, name)
}

// Status implements relay.Members: the mesh as this node sees it.
func (m *Mesh) Status() relay.MeshStatus {
	joined, err := m.ms.Joined()
	st := relay.MeshStatus{Name: m.ms.Name(), Addr: m.ms.Addr(), Joined: joined, Members: []relay.MemberStatus{}}
	if err != nil {
		st.Error = err.Error()
	}
	linked := m.n.MeshLinks()
	for _, mem := range m.ms.Members() {
		st.Members = append(st.Members, relay.MemberStatus{Name: mem.Name, Identifier: mem.ID, URL: mem.URL, Linked: linked[mem.Name]})
	}
	return st
}
