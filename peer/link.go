package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/solipsism/mesh/gameworld"
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
	stall     *time.Timer
	pingTimer *time.Timer
	mdTimer   *time.Timer
	rate      *rate.Limiter
	msgRate   *rate.Limiter // nil: unlimited
	recRate   *rate.Limiter
	// processed carries the outcome of each message, handled on a worker;
	// used only by the reading goroutine.
	processed chan error

	mu       sync.Mutex
	started  time.Time
	closeErr error
	md       Metadata
	hasMD    bool
	dialect  string
	// transfers is set when the peer takes part in ownership transfers.
	transfers atomic.Bool
	interval  time.Duration

	// Outbound state, guarded by outMu.
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
	outbox    []*item
	lastFlush time.Time
	coalesced uint64
	dropped   uint64
}

// item is one entry of a link's outbox: control messages, or records
// offered directly to an idle link (checked, each object once), or a queue
// that coalesces what arrives while the link is busy.
type item struct {
	flags uint8
	md    Metadata // with flagSendMD
	recs  []*Record
	q     *queue
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
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Link{
		conn: conn, h: h, opts: opts,
		log:      log,
		done:     make(chan struct{}),
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
	l.stall = time.AfterFunc(time.Hour, func() {
		l.logger().Warn("peer stalled; closing link", "timeout", l.opts.StallTimeout)
		l.closeWithMode(&CloseError{Code: StatusStalled, Reason: fmt.Sprintf("peer did not read for %s", l.opts.StallTimeout)}, true)
	})
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

// SendMetadata sends the peer md, after every record offered so far and
// before every record offered later.
func (l *Link) SendMetadata(md Metadata) { l.control(flagSendMD, md) }

// RequestMetadata asks the peer for its metadata.
func (l *Link) RequestMetadata() { l.control(flagReqMD, Metadata{}) }

// RequestRefresh asks the peer to send all its relevant objects.
func (l *Link) RequestRefresh() { l.control(flagReqRefresh, Metadata{}) }

func (l *Link) control(f uint8, md Metadata) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.closed {
		return
	}
	it := l.tailLocked()
	if it == nil || it.recs != nil || it.q != nil {
		it = l.appendLocked(&item{})
		if it == nil {
			return
		}
	}
	it.flags |= f
	if f == flagSendMD {
		it.md = md
	}
	l.startWriterLocked()
}

func (l *Link) tailLocked() *item {
	if len(l.outbox) == 0 {
		return nil
	}
	return l.outbox[len(l.outbox)-1]
}

// appendLocked appends it to the outbox, or cuts the link off if the
// outbox is full, returning nil. outMu must be held.
func (l *Link) appendLocked(it *item) *item {
	if len(l.outbox) >= maxOutbox {
		l.closed = true
		go l.closeWithMode(&CloseError{Code: StatusStalled, Reason: "peer fell too far behind"}, true)
		return nil
	}
	l.outbox = append(l.outbox, it)
	return it
}

// openQueueLocked returns the queue at the outbox's tail, adding one if
// the tail is not a queue. outMu must be held.
func (l *Link) openQueueLocked() *queue {
	if it := l.tailLocked(); it != nil && it.q != nil {
		return it.q
	}
	it := l.appendLocked(&item{q: &queue{}})
	if it == nil {
		return nil
	}
	return it.q
}

// Offer hands the link records that changed its node's world, in the order
// they took effect, with what to do with each: verdict(i) for recs[i]. A
// record the peer cannot take as it is becomes what it needs: an update of
// an object the peer lacks is sent as full(i), the object's complete state
// as an add (full may return nil, or be nil, to drop it); a remove of an
// object the peer never heard of is dropped. unique promises that no object
// appears twice in recs.
//
// Offer neither blocks nor writes: a link that is idle and due takes recs as
// they are and starts a writer; a busy one coalesces them into its queue.
func (l *Link) Offer(recs []*Record, verdict func(i int) Verdict, full func(i int) *Record, unique bool) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.closed {
		return
	}
	var direct *item
	var q *queue
	if unique && !l.writing && len(l.outbox) == 0 && !time.Now().Before(l.dueLocked()) {
		direct = &item{recs: *recsPool.Get().(*[]*Record)}
	}
	for i, r := range recs {
		switch verdict(i) {
		case Echo:
			if r.Type == gameworld.Remove {
				l.known.remove(r.Slot)
			} else {
				l.known.add(r.Slot)
			}
			continue
		case Skip:
			// Its slot may be reused for an object this peer is sent.
			if r.Type == gameworld.Remove {
				l.known.remove(r.Slot)
			}
			continue
		case Reveal:
			if l.known.has(r.Slot) {
				continue
			}
		case Keep:
			if !l.known.has(r.Slot) {
				continue
			}
		case Hide:
			if !l.known.has(r.Slot) {
				continue
			}
			if r.Type != gameworld.Remove {
				r = NewRecord(gameworld.Change{Type: gameworld.Remove, ID: r.ID, Owner: r.Owner}, r.Slot)
			}
		}
		if r.Type == gameworld.Transfer && r.Properties != nil {
			// (A transfer without properties is a request to an upstream
			// that takes them, and goes as it is.)
			switch {
			case !l.known.has(r.Slot) && !r.Answer:
				// (An answer stays one: the asker knows the object, and a
				// mesh member counts it as an acknowledgement.)
				r = AsAdd(r)
			case !l.transfers.Load():
				// For a peer that knows nothing of transfers an add never
				// changes an owner: it is told the object went, and in a
				// later message that it came back with its new owner. The
				// queue puts the two in separate messages.
				if direct != nil {
					if len(direct.recs) > 0 {
						l.outbox = append(l.outbox, direct)
					} else {
						recsPool.Put(&direct.recs)
					}
					direct = nil
				}
				if q == nil {
					if q = l.openQueueLocked(); q == nil {
						return
					}
				}
				q.push(NewRecord(gameworld.Change{Type: gameworld.Remove, ID: r.ID, Owner: r.PrevOwner}, r.Slot), &l.known)
				q.push(AsAdd(r), &l.known)
				continue
			}
		}
		switch r.Type {
		case gameworld.Update:
			if !l.known.has(r.Slot) {
				if full == nil {
					l.dropped++
					continue
				}
				if r = full(i); r == nil {
					l.dropped++
					continue
				}
			}
		case gameworld.Remove:
			if !l.known.has(r.Slot) {
				l.dropped++
				continue
			}
		}
		if direct != nil {
			if r.Type == gameworld.Remove {
				l.known.remove(r.Slot)
			} else {
				l.known.add(r.Slot)
			}
			direct.recs = append(direct.recs, r)
			continue
		}
		if q == nil {
			if q = l.openQueueLocked(); q == nil {
				return
			}
		}
		if e := q.entries[r.Slot]; e != nil && e.id == r.ID {
			l.coalesced++
		}
		q.push(r, &l.known)
	}
	if direct != nil {
		if len(direct.recs) > 0 {
			l.outbox = append(l.outbox, direct)
		} else {
			recsPool.Put(&direct.recs)
		}
	}
	l.startWriterLocked()
}

// MarkRefreshed marks the end of a refresh answer: records offered so far
// complete it, and the last message that carries them says so.
func (l *Link) MarkRefreshed() {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.closed {
		return
	}
	if q := l.openQueueLocked(); q != nil {
		q.refreshed = true
		l.startWriterLocked()
	}
}

// Queued returns the number of objects with changes waiting to be sent.
func (l *Link) Queued() int {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	n := 0
	for _, it := range l.outbox {
		n += len(it.recs)
		if it.q != nil {
			n += it.q.len()
		}
	}
	return n
}

// Counters returns how many records were coalesced into pending ones and
// how many were dropped because the peer could not need them.
func (l *Link) Counters() (coalesced, dropped uint64) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	return l.coalesced, l.dropped
}

// dueLocked returns when the link may flush next: one interval after the
// last flush, less half a tick of slack so that a link flushed on every
// node tick stays due on the next one despite scheduling jitter.
func (l *Link) dueLocked() time.Time {
	l.mu.Lock()
	iv := l.interval
	l.mu.Unlock()
	slack := min(l.opts.Tick/2, iv/2)
	return l.lastFlush.Add(iv - slack)
}

// recsPool holds the record lists of direct items: one per link and tick
// otherwise, grown record by record.
var recsPool = sync.Pool{New: func() any { return new([]*Record) }}

// startWriterLocked starts the writer if there is something to write and
// none runs. outMu must be held.
func (l *Link) startWriterLocked() {
	if l.writing || l.closed || len(l.outbox) == 0 {
		return
	}
	l.writing = true
	l.writers.Add(1)
	l.spawn(l.writeOut)
}

// spawn runs f on a worker, or on a goroutine of its own.
func (l *Link) spawn(f func()) {
	if l.opts.Workers != nil {
		l.opts.Workers.Go(f)
		return
	}
	go f()
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

// Run runs the link until it closes or ctx is done, reading on the calling
// goroutine (writers come and go as there is something to send). It returns
// why the link closed, after Handler.HandleClose has run.
func (l *Link) Run(ctx context.Context) error {
	// Setup and teardown are calls of their own, so that their frames are
	// not on the stack of the goroutine while it waits for messages: that
	// stack, kept for the link's whole life, stays small.
	stop := l.begin(ctx)
	err := l.readLoop()
	return l.end(err, stop)
}

func (l *Link) begin(ctx context.Context) (stop func() bool) {
	l.mu.Lock()
	l.started = time.Now()
	if l.opts.MetadataTimeout > 0 {
		l.mdTimer = time.AfterFunc(l.opts.MetadataTimeout, func() {
			if _, ok := l.Metadata(); !ok {
				l.Close(StatusNoMetadata, "no metadata received")
			}
		})
	}
	l.mu.Unlock()
	if ctx.Done() != nil { // a registration costs memory; skip it when ctx never ends
		stop = context.AfterFunc(ctx, func() { l.closeWith(ctx.Err()) })
	}
	if _, ok := l.conn.(Pinger); ok && l.opts.PingInterval > 0 {
		l.outMu.Lock()
		l.pingTimer = time.AfterFunc(l.pingDelay(), l.ping)
		l.outMu.Unlock()
	}
	return stop
}

func (l *Link) end(err error, stop func() bool) error {
	if stop != nil {
		stop()
	}
	l.mu.Lock()
	if l.mdTimer != nil {
		l.mdTimer.Stop()
	}
	l.mu.Unlock()
	l.closeWith(err)
	l.outMu.Lock()
	if l.pingTimer != nil {
		l.pingTimer.Stop()
	}
	l.outMu.Unlock()
	// No writer starts once closed is set (under outMu, by closeWith).
	l.writers.Wait()
	err = l.Err()
	l.logger().Debug("link closed", "err", err)
	l.h.HandleClose(l, err)
	return err
}

// readLoop waits for messages, with as shallow a stack as it can: it is
// what an idle link's goroutine does all its life.
func (l *Link) readLoop() error {
	for {
		if l.msgRate != nil {
			l.msgRate.Wait(context.Background()) //nolint:errcheck // never cancelled
		}
		// No context: the transport would register a cancellation per
		// read. Closing the connection is what ends a blocked read.
		r, err := l.conn.Reader(context.Background())
		if err == nil {
			err = l.process(r)
		}
		if err != nil {
			return l.readFailed(err)
		}
	}
}

// process decodes and handles one message on a worker and waits for it:
// decoding and routing grow a stack to many KiB, which the goroutine that
// waits for messages would otherwise keep for good.
func (l *Link) process(r io.Reader) error {
	if l.processed == nil {
		l.processed = make(chan error, 1)
	}
	l.spawn(func() {
		m, err := l.opts.Limits.ReadMessage(r, l.readBytes, l.opts.ReadBurst, l.handleChanges)
		if err == nil {
			err = l.handle(m)
		}
		l.processed <- err
	})
	return <-l.processed
}

func (l *Link) handleChanges(wc WorldChange) error {
	if l.recRate != nil && len(wc.Changes) > 0 {
		l.recRate.WaitN(context.Background(), min(len(wc.Changes), l.recRate.Burst())) //nolint:errcheck // never cancelled
	}
	l.stats.RecordsIn.Add(uint64(len(wc.Changes)))
	l.h.HandleWorldChange(l, wc)
	return nil
}

// readFailed returns why reading stopped: the close reason if the link was
// closed meanwhile, else err.
func (l *Link) readFailed(err error) error {
	select {
	case <-l.done:
		return l.Err()
	default:
	}
	var de *DecodeError
	if errors.As(err, &de) {
		l.logger().Debug("bad message", "err", err)
	}
	return err
}

// readBytes counts bytes read and, with a read rate, blocks to keep the
// link within it: a peer that sends faster is read slower, and TCP makes
// it wait.
func (l *Link) readBytes(n int) error {
	l.stats.BytesIn.Add(uint64(n))
	if l.rate != nil {
		return l.rate.WaitN(context.Background(), n)
	}
	return nil
}

// handle acts on one message; a worldChange's records were handled as they
// were read.
func (l *Link) handle(m Message) error {
	l.stats.MessagesIn[kindOf(m.Type)].Add(1)
	switch m.Type {
	case TypeRequestRefresh:
		l.h.HandleRequestRefresh(l)
	case TypeRequestMetadata:
		l.SendMetadata(l.h.LocalMetadata(l))
	case TypeMetadata, TypeMetadataChange:
		md, err := l.opts.Limits.DecodeMetadata(m.Data)
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.md, l.hasMD = md, true
		l.transfers.Store(md.Has(FeatureOwnership))
		l.dialect = m.Type
		if l.mdTimer != nil {
			l.mdTimer.Stop()
			l.mdTimer = nil
		}
		l.mu.Unlock()
		l.h.HandleMetadata(l, md)
	case TypeRequestLessData, TypeRequestMoreData:
		l.scaleInterval(m.Type == TypeRequestLessData)
	case TypeWorldChange:
	default:
		// Ignored and counted: newer peers may speak types we lack.
		l.logger().Debug("ignoring unknown message type", "type", m.Type)
	}
	return nil
}

// scaleInterval moves the flush interval by a factor of 1.2 within bounds.
func (l *Link) scaleInterval(less bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	iv := l.interval
	if less {
		if iv <= 0 {
			iv = 10 * time.Millisecond
		} else {
			iv = iv * 6 / 5
		}
		iv = min(iv, l.opts.MaxTick)
	} else {
		iv = max(iv*5/6, l.opts.MinTick)
	}
	l.interval = iv
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// writeOut is the writer goroutine: it writes the outbox in order, a queue
// once the link is due, and ends when the outbox is empty.
func (l *Link) writeOut() {
	defer l.writers.Done()
	bp := framePool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			framePool.Put(bp)
		}
	}()
	var batch Batch
	var timer *time.Timer
	for {
		l.outMu.Lock()
		if l.closed {
			l.outMu.Unlock()
			return
		}
		if len(l.outbox) == 0 {
			l.writing = false
			l.outbox = nil // an idle link keeps no buffers
			l.outMu.Unlock()
			return
		}
		it := l.outbox[0]
		if it.q != nil {
			if wait := time.Until(l.dueLocked()); wait > 0 {
				// Not due yet: what arrives meanwhile coalesces into it.
				l.outMu.Unlock()
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-l.done:
					return
				case <-timer.C:
				}
				continue
			}
		}
		l.outbox[0] = nil
		l.outbox = l.outbox[1:]
		if it.q != nil {
			it.q.drain(&batch)
		}
		if it.recs != nil || it.q != nil {
			l.lastFlush = time.Now()
		}
		l.outMu.Unlock()
		err := l.flush(bp, it, &batch)
		batch.reset()
		if it.recs != nil {
			clear(it.recs)
			recs := it.recs[:0]
			recsPool.Put(&recs)
		}
		if err != nil {
			l.closeWith(err)
			return
		}
	}
}

// pingDelay is the ping interval with ±25% jitter: links opened together
// (a reconnect storm, a load test) would otherwise ping together, each ping
// holding a goroutine until its pong, and all at once.
func (l *Link) pingDelay() time.Duration {
	iv := l.opts.PingInterval
	return iv*3/4 + rand.N(iv/2+1)
}

// ping checks the peer is alive, from the ping timer's goroutine, and
// re-arms the timer. A peer that does not answer within the stall timeout
// is cut off.
func (l *Link) ping() {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.StallTimeout)
	defer cancel()
	if err := l.conn.(Pinger).Ping(ctx); err != nil {
		select {
		case <-l.done:
			return
		default:
		}
		l.logger().Info("peer did not answer a keepalive ping; closing link", "timeout", l.opts.StallTimeout)
		l.closeWithMode(&CloseError{Code: StatusGoingAway, Reason: "keepalive ping failed"}, true)
		return
	}
	l.outMu.Lock()
	if !l.closed {
		l.pingTimer.Reset(l.pingDelay())
	}
	l.outMu.Unlock()
}

// flush writes one outbox item: its control messages, then its records
// (recs as one worldChange, split if large) or its queue's batch.
func (l *Link) flush(bp *[]byte, it *item, batch *Batch) error {
	if it.flags&flagSendMD != 0 {
		*bp = AppendMetadata((*bp)[:0], l.Dialect(), it.md)
		if err := l.write(*bp, KindMetadata); err != nil {
			return err
		}
	}
	if it.flags&flagReqMD != 0 {
		if err := l.write(AppendRequest((*bp)[:0], TypeRequestMetadata), KindRequestMetadata); err != nil {
			return err
		}
	}
	if it.flags&flagReqRefresh != 0 {
		if err := l.write(AppendRequest((*bp)[:0], TypeRequestRefresh), KindRequestRefresh); err != nil {
			return err
		}
	}
	ts := time.Now().UnixMilli()
	if len(it.recs) > 0 {
		if err := l.writeRecords(bp, it.recs, ts, false, false); err != nil {
			return err
		}
	}
	if batch.Empty() {
		return nil
	}
	if err := l.writeRecords(bp, batch.First, ts, batch.Refreshed && len(batch.Second) == 0, true); err != nil {
		return err
	}
	if len(batch.Second) > 0 {
		return l.writeRecords(bp, batch.Second, ts, batch.Refreshed, false)
	}
	return nil
}

// writeRecords sends recs in as few worldChange messages as MaxFrameBytes
// allows, assembled from the records' shared encodings.
func (l *Link) writeRecords(bp *[]byte, recs []*Record, ts int64, refreshed, allowEmpty bool) error {
	buf := AppendWorldChangeHeader((*bp)[:0], ts)
	head := len(buf)
	n := 0
	var oldest int64
	defer func() {
		if oldest != 0 && l.opts.Delivered != nil {
			l.opts.Delivered(time.Duration(time.Now().UnixNano() - oldest))
		}
	}()
	for _, r := range recs {
		if r.Born != 0 && (oldest == 0 || r.Born < oldest) {
			oldest = r.Born
		}
		enc := r.Encoded()
		if n > 0 && len(buf)+len(enc)+32 > l.opts.MaxFrameBytes {
			buf = AppendWorldChangeTrailer(buf, false)
			if err := l.write(buf, KindWorldChange); err != nil {
				return err
			}
			l.stats.RecordsOut.Add(uint64(n))
			buf, n = buf[:head], 0
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, enc...)
		n++
	}
	*bp = buf
	if n == 0 && !(refreshed && allowEmpty) {
		return nil
	}
	buf = AppendWorldChangeTrailer(buf, refreshed)
	*bp = buf
	if err := l.write(buf, KindWorldChange); err != nil {
		return err
	}
	l.stats.RecordsOut.Add(uint64(n))
	return nil
}

func (l *Link) write(p []byte, k MessageKind) error {
	l.stall.Reset(l.opts.StallTimeout)
	err := l.conn.Write(context.Background(), p)
	l.stall.Stop()
	if err != nil {
		select {
		case <-l.done:
			return l.Err()
		default:
		}
		return fmt.Errorf("write to %s: %w", l.conn.RemoteAddr(), err)
	}
	l.stats.MessagesOut[k].Add(1)
	l.stats.BytesOut.Add(uint64(len(p)))
	return nil
}
