package peer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/solipsism/mesh/ownership"
)

// Immediate, as LinkOptions.Tick, sends changes as soon as they are queued.
const Immediate time.Duration = -1

// Defaults for LinkOptions.
const (
	DefaultTick          = 50 * time.Millisecond
	DefaultStallTimeout  = 15 * time.Second
	DefaultPingInterval  = 20 * time.Second
	DefaultMaxFrameBytes = 256 << 10
	DefaultReadRate      = 16 << 20
	DefaultReadBurst     = 1 << 20
)

// Handler receives what a link's peer sends.
//
// Concurrency: HandleWorldChange, HandleRequestRefresh and HandleMetadata
// are called from the goroutine running Link.Run, one at a time, in the
// order the messages arrived. LocalMetadata may be called from any
// goroutine. HandleClose is called once, last.
type Handler interface {
	HandleWorldChange(l *Link, wc WorldChange)
	HandleRequestRefresh(l *Link)
	HandleMetadata(l *Link, md Metadata)
	// LocalMetadata returns what this side tells the peer about itself,
	// when the peer asks.
	LocalMetadata(l *Link) Metadata
	// HandleClose reports that the link has closed, and why.
	HandleClose(l *Link, err error)
}

// LinkOptions configures a Link. The zero value of every field but Handler
// means its default.
type LinkOptions struct {
	// ID names the link in logs and inspection.
	ID uint64
	// Kind is where the link leads; informational for the link itself.
	Kind ownership.LinkKind
	// Tick is how often queued changes are flushed. Zero means DefaultTick;
	// Immediate sends without delay.
	Tick time.Duration
	// MinTick and MaxTick bound how far requestMoreData and requestLessData
	// move the interval. Zero means Tick/2 and max(20×Tick, 1s).
	MinTick, MaxTick time.Duration
	// StallTimeout is how long one write may block before the link is
	// closed as stalled. Zero means DefaultStallTimeout.
	StallTimeout time.Duration
	// PingInterval is how often an idle-or-not peer is pinged, if the
	// transport supports it. Zero means DefaultPingInterval; negative
	// disables pings.
	PingInterval time.Duration
	// MetadataTimeout, if positive, closes the link with StatusNoMetadata
	// when the peer has not sent metadata that long after Run starts.
	MetadataTimeout time.Duration
	// MaxFrameBytes is the size above which a worldChange is split into
	// several messages. Zero means DefaultMaxFrameBytes.
	MaxFrameBytes int
	// Limits bound what the decoder holds of one message.
	Limits Limits
	// ReadRate bounds how fast the peer is read, in bytes per second, with
	// bursts of up to ReadBurst bytes: a peer that sends faster is read
	// slower (TCP makes it wait), so a big world arrives at a known pace.
	// Zero means DefaultReadRate and DefaultReadBurst; a negative ReadRate
	// reads as fast as the peer sends.
	ReadRate  int
	ReadBurst int
	// Logger receives the link's logs; nil discards them.
	Logger *slog.Logger
	// Workers, if set, runs the link's writer and message handling, so that
	// busy links reuse goroutines instead of starting one per tick and per
	// message. Nil starts a goroutine for each.
	Workers *Workers
	// Delivered, if set, is called after each worldChange written with the
	// age of its oldest record (see Record.Born), from the writer.
	Delivered func(age time.Duration)
	// MessageRate and RecordRate bound how many messages and change
	// records per second the link reads; a peer that sends faster is read
	// slower (throttled), not closed. Zero means unlimited.
	MessageRate, RecordRate float64
	// MaxQueuedMessageBytes bounds the ephemeral messages waiting for the
	// peer (SendAppMessage). Zero means DefaultMaxQueuedMessageBytes.
	MaxQueuedMessageBytes int
	// AwaitMetadata holds records back until the peer's metadata has
	// arrived (control messages go meanwhile), so that each is encoded
	// for what the peer takes: a record with scopes sent before then
	// would have to go as properties (FeatureScopes), and a peer that
	// takes scopes keep them as such beside its scopes. False sends at
	// once.
	AwaitMetadata bool
}

// Verdict is what a link does with one record its node offers it.
type Verdict uint8

const (
	// Skip: the record is not for this link's peer.
	Skip Verdict = iota
	// Send: send the record to the peer.
	Send
	// Echo: the peer sent this change itself, so it knows the outcome.
	Echo
	// Reveal: the object entered the peer's view; send it whole unless
	// the peer has it already.
	Reveal
	// Keep: send the record only if the peer has the object (an object
	// near the edge of the peer's region stays as long as it stays near).
	Keep
	// Hide: the object left the peer's view; send a remove if the peer has
	// it.
	Hide
	// Forget: the record is a remove the peer makes itself (it learns
	// from metadata that the object's owner departed): nothing is sent,
	// and what is still queued for the object is dropped, since the peer
	// would only remove it again.
	Forget
)

// Link is one connection to a peer world. Its methods are safe for
// concurrent use.
//
// A link has no goroutine of its own while it has nothing to write: the
// goroutine that calls Run reads, and a writer goroutine is started when
// there is something to send and ends when all is sent. Idle links cost
// their memory only.
type Link struct {
	conn  Conn
	h     Handler
	opts  LinkOptions
	log   *slog.Logger
	stats Stats

	done      chan struct{}
	closeOnce sync.Once
	// writers counts running writer goroutines (at most one).
	writers sync.WaitGroup
	// stall closes the link when a write blocks too long. One timer per
	// link, reused: a context per write would cost an allocation each and
	// keep one alive per idle link inside the transport.
	stall *time.Timer
	// writeSince is when the write in progress began (Unix nanoseconds;
	// zero if none); stallArmed says the stall timer is set (writer.go,
	// stalled).
	writeSince atomic.Int64
	stallArmed atomic.Bool
	pingTimer  *time.Timer
	mdTimer    *time.Timer
	// mdReady is closed when the peer's first metadata arrives.
	mdReady chan struct{}
	rate    *rate.Limiter
	msgRate *rate.Limiter // nil: unlimited
	recRate *rate.Limiter
	// processed carries the outcome of each message handled on a worker;
	// lastMsg (Unix nanoseconds) and run say whether the peer sends
	// steadily (reader.go). Used only by the reading goroutine.
	processed chan error
	lastMsg   int64
	run       int
	// heardAt is when bytes last came from the peer (Unix nanoseconds);
	// handling counts handlers running: while either says the peer is
	// alive, an unanswered keepalive is this node's delay, not the peer's.
	heardAt  atomic.Int64
	handling atomic.Int32

	// mu guards the link's identity and lifecycle: when it started, why it
	// closed, the peer's metadata and dialect, the flush interval. Held
	// briefly, never across I/O, never while outMu is taken after it.
	mu       sync.Mutex
	started  time.Time
	closeErr error
	md       Metadata
	hasMD    bool
	dialect  string
	// transfers is set when the peer takes part in ownership transfers.
	transfers atomic.Bool
	// scopes is set when the peer takes scope deltas.
	scopes   atomic.Bool
	interval time.Duration

	// Outbound state, guarded by outMu: what is queued and known. Offer
	// and the writer take it; the node calls Offer with its own lock held,
	// so a writer never calls the node (or waits on the network) with
	// outMu held: it takes a batch and writes after releasing it.
	outMu   sync.Mutex
	closed  bool
	writing bool
	// known is the set of slots whose objects the peer knows, counting
	// what is in the outbox.
	known slotSet
	// outbox is what waits to be written, in order. Control messages are
	// barriers: a metadata message goes after every record offered before
	// it was asked for and before every record offered after. Records
	// between two control messages coalesce in one queue.
	outbox []*item
	// prompt is metadata that goes at the next write, ahead of the
	// outbox (SendMetadataPrompt).
	prompt *Metadata
	// Chain announcements (Announce): told is the identifierChain the peer
	// holds once everything scheduled is written; left are worlds whose
	// departure waits in the queue being sent; announced is the latest
	// metadata announced out of order, which the queue's mark sends.
	told      map[string]bool
	left      map[string]bool
	announced *Metadata
	lastFlush time.Time
	coalesced uint64
	dropped   uint64
	// msgQueued is the bytes of ephemeral messages in the outbox.
	msgQueued int
}

// item is one entry of a link's outbox: control messages, or records
// offered directly to an idle link (checked, each object once), or a queue
// that coalesces what arrives while the link is busy.
type item struct {
	flags uint8
	md    Metadata // with flagSendMD
	// msgs are encoded control messages, sent after the flags' messages.
	msgs [][]byte
	// appOnly: msgs are ephemeral messages alone (SendAppMessage), which
	// records offered later may overtake (see openQueueLocked).
	appOnly bool
	recs    []*Record
	q       *queue
	// at is when the item's first records were offered: the link's pace
	// counts from when its message could have gone (see paceFrom), not
	// from when a busy node's worker came to write it.
	at time.Time
}

// maxOutbox bounds a link's outbox. Only control messages add items, and a
// link that keeps up has at most a few; one that has fallen this far behind
// is cut off as stalled rather than allowed to pile up queues.
const maxOutbox = 64

// Control messages, as flags.
const (
	flagSendMD uint8 = 1 << iota
	flagReqMD
	flagReqRefresh
)

// NewLink returns a link over conn. Call Run to start it.
func NewLink(conn Conn, h Handler, opts LinkOptions) *Link {
	if opts.Tick == 0 {
		opts.Tick = DefaultTick
	}
	if opts.Tick < 0 {
		opts.Tick = 0
	}
	if opts.MinTick == 0 {
		opts.MinTick = opts.Tick / 2
	}
	if opts.MaxTick == 0 {
		opts.MaxTick = max(20*opts.Tick, time.Second)
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if opts.MaxQueuedMessageBytes <= 0 {
		opts.MaxQueuedMessageBytes = DefaultMaxQueuedMessageBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Link{
		conn: conn, h: h, opts: opts,
		log:      log,
		done:     make(chan struct{}),
		mdReady:  make(chan struct{}),
		dialect:  TypeMetadataChange,
		interval: opts.Tick,
	}
	if opts.ReadRate >= 0 {
		if opts.ReadRate == 0 {
			opts.ReadRate = DefaultReadRate
		}
		if opts.ReadBurst <= 0 {
			opts.ReadBurst = min(DefaultReadBurst, opts.ReadRate)
		}
		l.opts = opts
		l.rate = rate.NewLimiter(rate.Limit(opts.ReadRate), opts.ReadBurst)
	}
	if opts.MessageRate > 0 {
		l.msgRate = rate.NewLimiter(rate.Limit(opts.MessageRate), max(1, int(opts.MessageRate)))
	}
	if opts.RecordRate > 0 {
		l.recRate = rate.NewLimiter(rate.Limit(opts.RecordRate), max(512, int(opts.RecordRate)))
	}
	// Writers may start before Run (a handshake is queued first).
	l.stall = time.AfterFunc(time.Hour, l.stalled)
	l.stall.Stop()
	return l
}

// logger returns the link's logger. The link's attributes are added only
// when something is logged: a logger with attributes costs memory, and an
// idle link should cost as little as possible.
func (l *Link) logger() *slog.Logger {
	return l.log.With("link", l.opts.ID, "kind", l.opts.Kind.String(), "remote", l.conn.RemoteAddr())
}

// ID returns the link's ID from LinkOptions.
func (l *Link) ID() uint64 { return l.opts.ID }

// Kind returns the link's kind from LinkOptions.
func (l *Link) Kind() ownership.LinkKind { return l.opts.Kind }

// RemoteAddr describes the peer.
func (l *Link) RemoteAddr() string { return l.conn.RemoteAddr() }

// Transfers reports whether the peer's metadata lists FeatureOwnership:
// it may be sent transfer records.
func (l *Link) Transfers() bool { return l.transfers.Load() }

// Stats returns the link's live counters.
func (l *Link) Stats() *Stats { return &l.stats }

// Started returns when Run was called.
func (l *Link) Started() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// Metadata returns the peer's metadata and whether it has sent any.
func (l *Link) Metadata() (Metadata, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.md, l.hasMD
}

// Dialect returns the name this link uses for metadata answers:
// TypeMetadataChange unless the peer showed it speaks TypeMetadata.
func (l *Link) Dialect() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dialect
}

// Interval returns the link's current flush interval.
func (l *Link) Interval() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.interval
}

// Err returns why the link closed, or nil while it is open.
func (l *Link) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeErr
}

// Close closes the link with a close code and reason for the peer.
func (l *Link) Close(code StatusCode, reason string) {
	l.closeWith(&CloseError{Code: code, Reason: reason})
}

// closeGrace is how long a graceful close may wait for the peer before the
// connection is cut: cleanup must not wait on a peer that does not answer.
const closeGrace = time.Second

// closeWith records err as the reason for closing, once, and closes the
// connection in the background, gracefully (the peer learns the close code)
// but within closeGrace.
func (l *Link) closeWith(err error) { l.closeWithMode(err, false) }

// closeWithMode is closeWith; hard skips the close handshake, for peers that
// do not read (stalled, or not answering pings) and so cannot take part.
func (l *Link) closeWithMode(err error, hard bool) {
	l.closeOnce.Do(func() {
		code, reason := StatusNormal, "closing"
		var de *DecodeError
		var ce *CloseError
		switch {
		case errors.As(err, &de):
			code, reason = de.Code, de.Error()
		case errors.As(err, &ce):
			code, reason = ce.Code, ce.Reason
		case errors.Is(err, context.Canceled):
			code, reason = StatusGoingAway, "shutting down"
		case err != nil:
			code, reason = StatusInternal, err.Error()
		}
		l.mu.Lock()
		l.closeErr = err
		l.mu.Unlock()
		l.outMu.Lock()
		l.closed = true
		l.outMu.Unlock()
		close(l.done)
		if hard {
			l.conn.CloseNow()
			return
		}
		go func() {
			done := make(chan struct{})
			go func() { l.conn.Close(code, reason); close(done) }()
			t := time.NewTimer(closeGrace)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
				l.conn.CloseNow()
			}
		}()
	})
}
