package alloverse

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/internal/loop"
	"github.com/solipsism/mesh/relay"
)

// Defaults of Options.
const (
	DefaultHeartbeat = 50 * time.Millisecond
	DefaultHistory   = 64
	DefaultPlaceName = "solipsism"
)

// Options configures a Bridge. The zero value serves with the defaults.
type Options struct {
	// Heartbeat is how often clients are sent state. Zero means
	// DefaultHeartbeat (20 Hz).
	Heartbeat time.Duration
	// History is how many revisions back a client's acknowledgement may be
	// and still get a diff rather than a set. Zero means DefaultHistory.
	History int
	// PatchStyle chooses the form of diffs; the zero value sends the
	// smaller of merge and apply.
	PatchStyle PatchStyle
	// PlaceName is the place's name, sent in announce responses. Empty
	// means DefaultPlaceName.
	PlaceName string
	// FirstRevision is the revision of the empty document before the
	// first change. Zero means 0: the first change makes revision 1.
	FirstRevision uint64
	// Auth, if set, checks the token of every client: WebSocket clients
	// present it on the handshake ("token" query parameter or a bearer
	// Authorization header; 401 without a valid one), ENet clients in the
	// identity of their announce ({"token": ...}). The agent's identifier
	// takes a prefix the token grants. Nil means no authentication.
	Auth auth.Authenticator
	// ViewRadius, if positive, sends each announced client only the
	// entities within this distance of its avatar on every axis (a cube),
	// by their "position" component or their transform's translation,
	// a child entity where its root is; and always its own entities and
	// those without a place. An entity it holds goes out of view only
	// past relay.DefaultInterestMargin more, so that one on the edge does
	// not come and go. Zero: every client is sent the whole world.
	ViewRadius float64
	// Logger receives the bridge's logs; nil discards them.
	Logger *slog.Logger
}

// Bridge serves one node's world to Alloverse clients. Its methods are safe
// for concurrent use.
type Bridge struct {
	node *relay.Node
	opts Options
	log  *slog.Logger
	obs  *relay.Attachment

	// wake resumes the heartbeats, which stop while there is no client.
	wake chan struct{}
	// inbox holds the node's deliveries until the next heartbeat.
	inbox relay.Inbox

	mu       sync.Mutex
	st       *state
	sessions map[*Session]struct{}
	closed   bool

	// beats counts heartbeats.
	beats atomic.Uint64

	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a bridge serving n's world. Call Close to stop it.
func New(n *relay.Node, opts Options) (*Bridge, error) {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.PlaceName == "" {
		opts.PlaceName = DefaultPlaceName
	}
	if opts.FirstRevision > MaxRevision {
		return nil, fmt.Errorf("alloverse: first revision %d is above %d", opts.FirstRevision, MaxRevision)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{node: n, opts: opts, log: log.With("bridge", "alloverse"),
		st: newState(opts.FirstRevision, opts.History, opts.PatchStyle), sessions: map[*Session]struct{}{}, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	b.st.views = opts.ViewRadius > 0
	b.inbox.Wake = b.wake // what comes while it sleeps (the world's removes when the last client left) is taken
	obs, err := n.Attach(relay.AttachOptions{Receiver: &b.inbox})
	if err != nil {
		return nil, fmt.Errorf("alloverse: joining the node: %w", err)
	}
	b.obs = obs
	// Until a client connects the bridge needs nothing of the world, and
	// the node's upstream and mesh peers need not send it.
	obs.SetInterest(nil, true)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go b.loop(ctx)
	return b, nil
}

// Close disconnects every client and stops the bridge.
func (b *Bridge) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	sessions := make([]*Session, 0, len(b.sessions))
	for s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.mu.Unlock()
	for _, s := range sessions {
		s.conn.Close(StatusGoingAway, "place shutting down")
		s.Close()
	}
	b.cancel()
	<-b.done
	b.obs.Detach()
}

func (b *Bridge) loop(ctx context.Context) {
	defer close(b.done)
	loop.EveryWhileBusy(ctx, b.opts.Heartbeat, b.wake, b.heartbeat)
}

// heartbeat takes the world's changes into the document, as one new
// revision if anything changed, and sends every client what it lacks. It
// reports whether the next heartbeat has anything to do: without clients
// (the node then sends the bridge nothing) heartbeats wait until one
// comes, and the history goes.
func (b *Bridge) heartbeat() (busy bool) {
	b.beats.Add(1)
	in := b.inbox.Take()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range in {
		b.st.apply(d)
	}
	changed := b.st.commit()
	if !changed && b.resendsLocked() {
		b.st.bump()
		changed = true
	}
	beat := b.beats.Load()
	for s := range b.sessions {
		if s.ack == b.st.rev && s.ack != 0 || s.sent == b.st.rev {
			continue // up to date, or sent this revision and awaiting its acknowledgement
		}
		p := b.st.packet
		if s.mergeOnly {
			p = b.st.mergePacketFor
		}
		if s.view != nil {
			now := b.st.visible(s.viewAgent, s.viewFrom, b.opts.ViewRadius, relay.DefaultInterestMargin, s.view.held[s.sent])
			p = func(ack uint64) []byte { return b.st.viewPacket(s.view, now, ack, s.mergeOnly) }
		}
		if pkt := p(s.ack); pkt != nil {
			s.conn.SendState(pkt)
			s.sent, s.sentAt = b.st.rev, beat
		}
	}
	if len(b.sessions) == 0 {
		b.st.forgetHistory()
	}
	return len(b.sessions) > 0 || len(in) > 0
}

// A client has resendBeats heartbeats to acknowledge a state before it is
// sent again (the packet or its acknowledgement may have been lost); each
// time it is sent again without acknowledging, it has twice as long, up to
// maxResendBeats: a client slower than that (a big set crawling through a
// slow link) is not sent a new revision on every heartbeat.
const (
	resendBeats    = 4
	maxResendBeats = 64
)

// resendsLocked reports whether this heartbeat must send some client again
// the revision it was last sent (not acknowledged in time), or would send
// revision 0 (which an acknowledgement cannot tell from "send me a set"):
// the heartbeat then numbers the document afresh, so that no client is
// ever sent the same revision twice. b.mu must be held.
func (b *Bridge) resendsLocked() bool {
	if b.st.rev == 0 && len(b.sessions) > 0 {
		// Every client lacks a state (revision 0 is never sent), an
		// empty place's first ones too.
		return true
	}
	beat := b.beats.Load()
	resend := false
	for s := range b.sessions {
		if s.ack == b.st.rev {
			continue
		}
		wait := max(s.wait, resendBeats)
		if s.sent == b.st.rev && beat-s.sentAt >= wait {
			s.wait = min(2*wait, maxResendBeats)
			resend = true
		}
	}
	return resend
}

// Revision returns the document's current revision.
func (b *Bridge) Revision() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st.rev
}

// StateHandler serves, to GET and HEAD, what the place serves its clients
// now: {"sessions":[{"ack":…,"sent":…},…],"entities":{…},"revision":…},
// the revision each client acknowledged last (0: none yet, or it asked for
// a set) and the revision of the last state it was sent, then the document
// as Document returns it. It is an operator's
// endpoint (every entity of the world): mount it behind the same access
// control as the node's state.
func (b *Bridge) StateHandler() http.Handler {
	return api.ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		revs := make([][2]uint64, 0, len(b.sessions))
		for s := range b.sessions {
			revs = append(revs, [2]uint64{s.ack, s.sent})
		}
		b.mu.Unlock()
		slices.SortFunc(revs, func(x, y [2]uint64) int { return cmp.Compare(x[0], y[0]) })
		out := []byte(`{"sessions":[`)
		for i, r := range revs {
			if i > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendUint(append(out, `{"ack":`...), r[0], 10)
			out = strconv.AppendUint(append(out, `,"sent":`...), r[1], 10)
			out = append(out, '}')
		}
		out = append(append(out, "],"...), b.Document()[1:]...)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(out) //nolint:errcheck // the client went away
	}))
}

// Document returns the current document as a set packet would carry it,
// without patch_style.
func (b *Bridge) Document() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.st.setPacket()
	const prefix = `{"patch_style":"set",`
	return append([]byte{'{'}, p[len(prefix):]...)
}
