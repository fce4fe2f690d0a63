package membership

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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"
)

// Options configures Start. BindAddr, ID, URL and Events are required;
// the zero value of every other field means its default.
type Options struct {
	// BindAddr is the host:port memberlist listens on (UDP and TCP). Port 0
	// picks a free port.
	BindAddr string
	// ID and URL are this member's world identifier and the ws:// or
	// wss:// URL the others dial, gossiped to them.
	ID, URL string
	// Join lists host:port addresses of existing members. Empty starts a
	// new mesh.
	Join []string
	// SecretKey (16, 24 or 32 bytes) encrypts and authenticates gossip,
	// and keys Auth. Nil means none.
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
	// JoinRetry is how often a failed join is retried. Zero means 5 s.
	JoinRetry time.Duration
	// Events is told of the other members.
	Events Events
	// Logger receives memberlist's logs and ours; nil discards them.
	Logger *slog.Logger
}

// Member is another member as gossiped.
type Member struct {
	// Name is its memberlist name, fresh per process; Addr its memberlist
	// host:port.
	Name, Addr string
	// ID and URL are its world identifier and WebSocket URL.
	ID, URL string
	// Leaving is set once it said it is leaving on purpose.
	Leaving bool
}

// meta is what a member gossips about itself.
type meta struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Leaving is gossiped just before a member leaves on purpose (Leave).
	// Members of older versions ignore it.
	Leaving bool `json:"leaving,omitempty"`
}

// Membership is this node's view of the mesh, and its voice in it.
type Membership struct {
	opts   Options
	log    *slog.Logger
	list   *memberlist.Memberlist
	name   string
	events chan memberlist.NodeEvent
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	meta    []byte
	members map[string]Member
	joined  bool
	joinErr error
	stopped bool
}

// Start starts memberlist and joins opts.Join, retrying in the background
// if that fails.
func Start(opts Options) (*Membership, error) {
	if opts.JoinRetry <= 0 {
		opts.JoinRetry = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	host, portStr, err := net.SplitHostPort(opts.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("membership: bind address %q: %w", opts.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("membership: bind port %q: %w", portStr, err)
	}
	md, _ := json.Marshal(meta{ID: opts.ID, URL: opts.URL}) // plain strings
	if len(md) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("membership: node metadata is %d bytes, memberlist allows %d: shorten the advertise URL", len(md), memberlist.MetaMaxSize)
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
		return nil, fmt.Errorf("membership: profile %q: want lan, local or wan", opts.Profile)
	}
	if opts.ProbeInterval > 0 {
		cfg.ProbeInterval = opts.ProbeInterval
		cfg.ProbeTimeout = opts.ProbeInterval / 2
	}
	// The local profile retransmits gossip so sparingly that a member can
	// miss a joiner until the next push/pull; keep the LAN default.
	cfg.RetransmitMult = max(cfg.RetransmitMult, 4)
	ctx, cancel := context.WithCancel(context.Background())
	m := &Membership{
		opts: opts,
		// A fresh name per process: a restarted node is a new member, so it
		// never collides with its own ghost.
		name:    uuid.NewString(),
		meta:    md,
		events:  make(chan memberlist.NodeEvent, 1024),
		ctx:     ctx,
		cancel:  cancel,
		members: make(map[string]Member),
	}
	m.log = opts.Logger.With("mesh", m.name)
	cfg.Name, cfg.BindAddr, cfg.BindPort, cfg.AdvertisePort = m.name, host, port, port
	cfg.Label, cfg.SecretKey = opts.Label, opts.SecretKey
	cfg.Delegate = delegate{m}
	// Events arrive on a channel and are handled on our own goroutine:
	// memberlist forbids blocking or calling back into it from its
	// callbacks.
	cfg.Events = &memberlist.ChannelEventDelegate{Ch: m.events}
	cfg.Logger = log.New(&logWriter{log: m.log}, "", 0)
	list, err := memberlist.Create(cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("membership: starting memberlist on %s: %w", opts.BindAddr, err)
	}
	m.list = list
	m.wg.Add(1)
	go m.loop()
	if len(opts.Join) > 0 && m.join() != nil {
		m.wg.Add(1)
		go m.retryJoin()
	}
	return m, nil
}

// Name returns this member's memberlist name.
func (m *Membership) Name() string { return m.name }

// Addr returns the host:port memberlist listens on, for others to join.
func (m *Membership) Addr() string { return m.list.LocalNode().Address() }

// NumMembers is memberlist's count of live members, this one included.
func (m *Membership) NumMembers() int { return m.list.NumMembers() }

// Joined reports whether this member joined the mesh it was told to (or
// started its own), and the last join error.
func (m *Membership) Joined() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joined || len(m.opts.Join) == 0, m.joinErr
}

// Members returns the other members, by name.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, mem)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Alive reports whether name is a member now. A member that is gone stays
// one until Events.MemberDown for it has returned.
func (m *Membership) Alive(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.members[name]
	return ok
}

// Stopped reports whether this member has left (Leave or Kill).
func (m *Membership) Stopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

// Auth returns the credential member name presents on a mesh link: an
// HMAC of its name under the secret key; "" without one.
func (m *Membership) Auth(name string) string {
	if len(m.opts.SecretKey) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, m.opts.SecretKey)
	mac.Write([]byte("solipsism-mesh-link:" + name))
	return hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether auth is name's credential (anything is, without
// a secret key).
func (m *Membership) Verify(name, auth string) bool {
	want := m.Auth(name)
	return want == "" || hmac.Equal([]byte(want), []byte(auth))
}

// Sync merges this member's view of the mesh with the member at addr's (a
// push/pull): for a member that does not know us yet.
func (m *Membership) Sync(addr string) error {
	_, err := m.list.Join([]string{addr})
	return err
}

func (m *Membership) join() error {
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

func (m *Membership) retryJoin() {
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

// stop marks the member stopped; false if it was already.
func (m *Membership) stop() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.stopped
	m.stopped = true
	return !was
}

// Leave says this member is leaving on purpose, leaves (as memberlist
// requires: Leave, then Shutdown) and stops telling events.
func (m *Membership) Leave() error {
	if !m.stop() {
		return nil
	}
	m.mu.Lock()
	m.meta, _ = json.Marshal(meta{ID: m.opts.ID, URL: m.opts.URL, Leaving: true}) // plain strings
	m.mu.Unlock()
	if err := m.list.UpdateNode(time.Second); err != nil {
		m.log.Debug("announcing our leave", "err", err)
	}
	err := m.list.Leave(2 * time.Second)
	if serr := m.list.Shutdown(); err == nil {
		err = serr
	}
	m.cancel()
	m.wg.Wait()
	return err
}

// Kill stops memberlist without leaving, as a crash would: the others
// find out through failure detection.
func (m *Membership) Kill() {
	m.stop()
	m.list.Shutdown()
	m.cancel()
	m.wg.Wait()
}

// loop tells membership events one at a time.
func (m *Membership) loop() {
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
				m.up(ev.Node)
			case memberlist.NodeLeave:
				m.down(ev.Node.Name)
			}
		}
	}
}

// ParseMeta decodes a member's metadata, as gossiped to us.
func ParseMeta(b []byte) (id, url string, leaving bool, err error) {
	var md meta
	if err := json.Unmarshal(b, &md); err != nil {
		return "", "", false, fmt.Errorf("node metadata: %w", err)
	}
	if md.ID == "" || md.URL == "" {
		return "", "", false, errors.New("node metadata lacks an identifier or URL")
	}
	if !strings.HasPrefix(md.URL, "ws://") && !strings.HasPrefix(md.URL, "wss://") {
		return "", "", false, fmt.Errorf("node metadata URL %q is not ws:// or wss://", md.URL)
	}
	return md.ID, md.URL, md.Leaving, nil
}

func (m *Membership) up(node *memberlist.Node) {
	id, url, leaving, err := ParseMeta(node.Meta)
	if err != nil {
		m.log.Warn("ignoring member with unreadable metadata", "member", node.Name, "err", err)
		return
	}
	mem := Member{Name: node.Name, Addr: node.Address(), ID: id, URL: url, Leaving: leaving}
	m.mu.Lock()
	old, known := m.members[node.Name]
	same := known && old.ID == id && old.URL == url
	if same {
		// Only its leaving changed, or nothing: its link stays until it goes.
		old.Leaving = old.Leaving || leaving
		m.members[node.Name] = old
	} else {
		m.members[node.Name] = mem
	}
	m.mu.Unlock()
	if same {
		return
	}
	m.log.Info("member up", "member", node.Name, "identifier", id, "url", url)
	m.opts.Events.MemberUp(mem)
}

func (m *Membership) down(name string) {
	m.mu.Lock()
	mem, ok := m.members[name]
	m.mu.Unlock()
	if !ok {
		return
	}
	m.log.Info("member gone", "member", name, "identifier", mem.ID, "left", mem.Leaving)
	// Alive says yes until MemberDown has returned: what the member's
	// link closing does meanwhile (it may close first) must not act as
	// if the member were handled already.
	m.opts.Events.MemberDown(mem)
	m.mu.Lock()
	delete(m.members, name)
	m.mu.Unlock()
}
