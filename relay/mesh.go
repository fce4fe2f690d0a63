package relay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Headers a mesh dialer sends so the acceptor knows the link is a mesh link.
const (
	meshNameHeader = "Solipsism-Mesh"
	meshAuthHeader = "Solipsism-Mesh-Auth"
)

// MeshOptions configures JoinMesh. BindAddr and AdvertiseURL are required;
// the zero value of every other field means its default.
type MeshOptions struct {
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

// nodeMeta is what a member tells the others through memberlist.
type nodeMeta struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Leaving is gossiped just before a member leaves on purpose (Close):
	// the others then take over what it owned itself (adoptLeftMember).
	// Members of older versions ignore it.
	Leaving bool `json:"leaving,omitempty"`
}

// Mesh joins a server Node to other server nodes. Membership and failure
// detection come from hashicorp/memberlist; the data flows over one
// WebSocket link per pair of members, dialed by the member whose name sorts
// first.
type Mesh struct {
	n      *Node
	opts   MeshOptions
	log    *slog.Logger
	list   *memberlist.Memberlist
	name   string
	meta   []byte
	events chan memberlist.NodeEvent
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	members map[string]*member
	joined  bool
	joinErr error
	stopped bool
}

type member struct {
	name   string
	addr   string // memberlist host:port
	meta   nodeMeta
	cancel context.CancelFunc // stops our dial loop, if we dial
}

// JoinMesh starts memberlist for n, joins opts.Join (retrying in the
// background if that fails) and keeps one link to every other member.
func (n *Node) JoinMesh(opts MeshOptions) (*Mesh, error) {
	if n.role != ownership.Server {
		return nil, errors.New("relay: only server nodes join a mesh")
	}
	if opts.AdvertiseURL == "" {
		return nil, errors.New("relay: mesh needs an advertise URL")
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.JoinRetry <= 0 {
		opts.JoinRetry = 5 * time.Second
	}
	host, portStr, err := net.SplitHostPort(opts.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("relay: mesh bind address %q: %w", opts.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("relay: mesh bind port %q: %w", portStr, err)
	}
	meta, err := json.Marshal(nodeMeta{ID: n.id, URL: opts.AdvertiseURL})
	if err != nil {
		return nil, err
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("relay: node metadata is %d bytes, memberlist allows %d: shorten the advertise URL", len(meta), memberlist.MetaMaxSize)
	}
	var cfg *memberlist.Config
	switch opts.Profile {
	case "", "lan":
		cfg = memberlist.DefaultLANConfig()
	case "local":
		cfg = memberlist.DefaultLocalConfig()
	case "wan":
		cfg = memberlist.DefaultWANConfig()
	default:
		return nil, fmt.Errorf("relay: mesh profile %q: want lan, local or wan", opts.Profile)
	}
	if opts.ProbeInterval > 0 {
		cfg.ProbeInterval = opts.ProbeInterval
		cfg.ProbeTimeout = opts.ProbeInterval / 2
	}
	// The local profile retransmits gossip so sparingly that a member can
	// miss a joiner until the next push/pull; keep the LAN default.
	cfg.RetransmitMult = max(cfg.RetransmitMult, 4)
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mesh{
		n: n, opts: opts,
		// A fresh name per process: a restarted node is a new member, so it
		// never collides with its own ghost.
		name:    uuid.NewString(),
		meta:    meta,
		events:  make(chan memberlist.NodeEvent, 1024),
		ctx:     ctx,
		cancel:  cancel,
		members: make(map[string]*member),
	}
	m.log = n.log.With("mesh", m.name)
	cfg.Name = m.name
	cfg.BindAddr = host
	cfg.BindPort = port
	cfg.AdvertisePort = port
	cfg.Label = opts.Label
	cfg.SecretKey = opts.SecretKey
	cfg.Delegate = m
	// Events arrive on a channel and are handled on our own goroutine:
	// memberlist forbids blocking or calling back into it from its
	// callbacks.
	cfg.Events = &memberlist.ChannelEventDelegate{Ch: m.events}
	cfg.Logger = log.New(&memberlistLog{log: m.log}, "", 0)
	list, err := memberlist.Create(cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("relay: starting memberlist on %s: %w", opts.BindAddr, err)
	}
	m.list = list
	n.mu.Lock()
	n.hub.mesh = m
	n.mu.Unlock()
	m.wg.Add(1)
	go m.loop()
	if len(opts.Join) > 0 {
		if err := m.join(); err != nil {
			m.wg.Add(1)
			go m.retryJoin()
		}
	}
	m.log.Info("mesh started", "bind", list.LocalNode().Address(), "advertise", opts.AdvertiseURL, "encrypted", len(opts.SecretKey) > 0, "label", opts.Label)
	if len(opts.SecretKey) == 0 {
		m.log.Warn("the mesh runs unencrypted and unauthenticated: anyone who reaches the mesh port can join and write; set a mesh secret (--mesh-secret)")
	}
	return m, nil
}

// Addr returns the host:port memberlist listens on, for others to join.
func (m *Mesh) Addr() string { return m.list.LocalNode().Address() }

// Name returns this member's memberlist name.
func (m *Mesh) Name() string { return m.name }

func (m *Mesh) join() error {
	k, err := m.list.Join(m.opts.Join)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || k == 0 {
		if err == nil {
			err = errors.New("no member answered")
		}
		m.joinErr = err
		m.log.Error("could not join the mesh; check that --mesh-secret and --mesh-label match the other members and that they are reachable",
			"join", m.opts.Join, "err", err)
		return err
	}
	m.joined, m.joinErr = true, nil
	m.log.Info("joined the mesh", "contacted", k)
	return nil
}

func (m *Mesh) retryJoin() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.JoinRetry)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if m.join() == nil {
				return
			}
		}
	}
}

// Close leaves the mesh gracefully (Leave, then Shutdown, as memberlist
// requires) and closes the mesh links.
func (m *Mesh) Close() error {
	m.mu.Lock()
	stopped := m.stopped
	m.stopped = true
	m.mu.Unlock()
	if stopped {
		return nil
	}
	// Say we are leaving on purpose, then leave.
	m.mu.Lock()
	m.meta, _ = json.Marshal(nodeMeta{ID: m.n.id, URL: m.opts.AdvertiseURL, Leaving: true}) // plain strings
	m.mu.Unlock()
	if uerr := m.list.UpdateNode(time.Second); uerr != nil {
		m.log.Debug("announcing our leave", "err", uerr)
	}
	err := m.list.Leave(2 * time.Second)
	if serr := m.list.Shutdown(); err == nil {
		err = serr
	}
	m.cancel()
	m.wg.Wait()
	m.n.mu.Lock()
	for _, ls := range m.n.hub.order {
		if ls.kind == ownership.Mesh {
			ls.link.Close(peer.StatusGoingAway, "leaving the mesh")
		}
	}
	m.n.mu.Unlock()
	return err
}

// Shutdown stops memberlist without leaving, as a crash would: the others
// find out through failure detection. For tests.
func (m *Mesh) shutdownAbruptly() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.list.Shutdown()
	m.cancel()
	m.wg.Wait()
}

// loop handles membership events one at a time.
func (m *Mesh) loop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case ev := <-m.events:
			if ev.Node == nil || ev.Node.Name == m.name {
				continue
			}
			switch ev.Event {
			case memberlist.NodeJoin, memberlist.NodeUpdate:
				m.memberUp(ev.Node)
			case memberlist.NodeLeave:
				m.memberDown(ev.Node.Name)
			}
		}
	}
}

// parseNodeMeta decodes a member's NodeMeta, as gossiped to us.
func parseNodeMeta(b []byte) (nodeMeta, error) {
	var meta nodeMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return meta, fmt.Errorf("node metadata: %w", err)
	}
	if meta.ID == "" || meta.URL == "" {
		return meta, errors.New("node metadata lacks an identifier or URL")
	}
	if !strings.HasPrefix(meta.URL, "ws://") && !strings.HasPrefix(meta.URL, "wss://") {
		return meta, fmt.Errorf("node metadata URL %q is not ws:// or wss://", meta.URL)
	}
	return meta, nil
}

func (m *Mesh) memberUp(node *memberlist.Node) {
	meta, err := parseNodeMeta(node.Meta)
	if err != nil {
		m.log.Warn("ignoring member with unreadable metadata", "member", node.Name, "err", err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.members[node.Name]
	if old != nil && old.meta == meta {
		return
	}
	if old != nil && meta.Leaving && old.meta.ID == meta.ID && old.meta.URL == meta.URL {
		old.meta.Leaving = true // (its link stays until it goes)
		return
	}
	if old != nil && old.cancel != nil {
		old.cancel()
	}
	mem := &member{name: node.Name, addr: node.Address(), meta: meta}
	m.members[node.Name] = mem
	m.log.Info("member up", "member", node.Name, "identifier", meta.ID, "url", meta.URL)
	if m.name < node.Name {
		ctx, cancel := context.WithCancel(m.ctx)
		mem.cancel = cancel
		m.wg.Add(1)
		go m.dialLoop(ctx, mem)
	}
}

func (m *Mesh) memberDown(name string) {
	m.mu.Lock()
	mem := m.members[name]
	delete(m.members, name)
	m.mu.Unlock()
	if mem == nil {
		return
	}
	if mem.cancel != nil {
		mem.cancel()
	}
	left := mem.meta.Leaving
	m.log.Info("member gone", "member", name, "identifier", mem.meta.ID, "left", left)
	if left {
		// It stopped on purpose (a drain, an upgrade): what it owned
		// itself goes on at a member, as it would have handed it over:
		// the lowest identifier of the membership, which every survivor
		// sees alike (the links, not yet all up, might not).
		heir := m.n.id
		m.mu.Lock()
		for _, o := range m.members {
			if o.meta.ID != mem.meta.ID && !o.meta.Leaving && o.meta.ID < heir {
				heir = o.meta.ID
			}
		}
		m.mu.Unlock()
		m.n.adoptLeftMember(mem.meta.ID, heir)
	}
	m.n.meshMemberGone(name)
}

// alive reports whether memberlist still counts name as a member.
// leaving reports whether this node has left the mesh (Close).
func (m *Mesh) leaving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

func (m *Mesh) alive(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.members[name] != nil
}

func (m *Mesh) auth(name string) string {
	if len(m.opts.SecretKey) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, m.opts.SecretKey)
	mac.Write([]byte("solipsism-mesh-link:" + name))
	return hex.EncodeToString(mac.Sum(nil))
}

// dialLoop keeps a link to mem open while it is a member.
func (m *Mesh) dialLoop(ctx context.Context, mem *member) {
	defer m.wg.Done()
	failures := 0
	for ctx.Err() == nil {
		dopts := m.opts.Dial
		dopts.Header = http.Header{}
		for k, v := range m.opts.Dial.Header {
			dopts.Header[k] = v
		}
		dopts.Header.Set(meshNameHeader, m.name)
		if a := m.auth(m.name); a != "" {
			dopts.Header.Set(meshAuthHeader, a)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := peer.Dial(dctx, mem.meta.URL, dopts)
		cancel()
		if err == nil {
			start := time.Now()
			stop := context.AfterFunc(ctx, func() { conn.Close(peer.StatusGoingAway, "member left the mesh") })
			err = m.n.serveMesh(conn, mem.name, mem.meta.URL)
			stop()
			if time.Since(start) >= defaultStableAfter {
				failures = 0 // a link that died at once keeps backing off
			}
			m.log.Debug("mesh link closed", "member", mem.name, "err", err)
		} else {
			m.log.Debug("mesh dial failed", "member", mem.name, "url", mem.meta.URL, "err", err)
			var he *peer.HandshakeError
			if errors.As(err, &he) && he.StatusCode == http.StatusServiceUnavailable && failures%4 == 1 {
				// It does not know us yet: gossip has not reached it. A
				// push/pull with it merges our view of the mesh into its.
				if _, err := m.list.Join([]string{mem.addr}); err != nil {
					m.log.Debug("membership sync failed", "member", mem.name, "err", err)
				}
			}
		}
		d := backoff(failures, m.opts.MinBackoff, m.opts.MaxBackoff)
		failures++
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// accept serves an incoming mesh link after checking who dials.
func (m *Mesh) accept(w http.ResponseWriter, r *http.Request) {
	name := r.Header.Get(meshNameHeader)
	if want := m.auth(name); want != "" && !hmac.Equal([]byte(want), []byte(r.Header.Get(meshAuthHeader))) {
		m.log.Warn("refused mesh link with bad authentication", "member", name, "remote", r.RemoteAddr)
		http.Error(w, "mesh link authentication failed", http.StatusForbidden)
		return
	}
	if !m.alive(name) {
		// Gossip may not have told us about the dialer yet; it retries.
		http.Error(w, "not a member of this mesh (yet)", http.StatusServiceUnavailable)
		return
	}
	conn, err := peer.Accept(w, r, peer.AcceptOptions{})
	if err != nil {
		return
	}
	m.n.goRun(m.n.attach(conn, ownership.Mesh, "", name))
}

// memberlist.Delegate: only NodeMeta carries anything; the world travels
// over the WebSocket links.
