package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	// LocalMetadata returns what this side tells the peer about itself.
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
	// Limits bound what the decoder accepts.
	Limits Limits
	// Logger receives the link's logs; nil discards them.
	Logger *slog.Logger
}

// Link is one connection to a peer world. Its methods are safe for
// concurrent use.
type Link struct {
	conn  Conn
	h     Handler
	opts  LinkOptions
	log   *slog.Logger
	queue Queue
	stats Stats

	wake       chan struct{}
	done       chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	started    time.Time
	// stall closes the link when a write blocks too long. One timer per
	// link, reused: a context per write would cost an allocation each and
	// keep one alive per idle link inside the transport.
	stall   *time.Timer
	mdTimer *time.Timer

	mu         sync.Mutex
	closeErr   error
	md         Metadata
	hasMD      bool
	dialect    string
	interval   time.Duration
	sendMD     bool
	reqMD      bool
	reqRefresh bool
	pinging    bool
	lastFlush  time.Time
}

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
	return &Link{
		conn: conn, h: h, opts: opts,
		log:        log.With("link", opts.ID, "remote", conn.RemoteAddr()),
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		dialect:    TypeMetadataChange,
		interval:   opts.Tick,
	}
}

// ID returns the link's ID from LinkOptions.
func (l *Link) ID() uint64 { return l.opts.ID }

// Kind returns the link's kind from LinkOptions.
func (l *Link) Kind() ownership.LinkKind { return l.opts.Kind }

// RemoteAddr describes the peer.
func (l *Link) RemoteAddr() string { return l.conn.RemoteAddr() }

// Stats returns the link's live counters.
func (l *Link) Stats() *Stats { return &l.stats }

// Queue returns the link's outbound queue.
func (l *Link) Queue() *Queue { return &l.queue }

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

// Send queues a change record. full returns the object's complete state as
// an add, for peers that do not know the object yet (see Queue.Push).
func (l *Link) Send(r *Record, full func() *Record) {
	if l.queue.Push(r, full) {
		l.signal()
	}
}

// SendRefreshed marks the end of a refresh answer queued with Send.
func (l *Link) SendRefreshed() {
	l.queue.MarkRefreshed()
	l.signal()
}

// SendMetadata sends the peer this side's metadata (from
// Handler.LocalMetadata, read when the message is written).
func (l *Link) SendMetadata() { l.setFlag(&l.sendMD) }

// RequestMetadata asks the peer for its metadata.
func (l *Link) RequestMetadata() { l.setFlag(&l.reqMD) }

// RequestRefresh asks the peer to send all its relevant objects.
func (l *Link) RequestRefresh() { l.setFlag(&l.reqRefresh) }

func (l *Link) setFlag(f *bool) {
	l.mu.Lock()
	*f = true
	l.mu.Unlock()
	l.signal()
}

func (l *Link) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
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
// goroutine and writing on one of its own. It returns why the link closed,
// after Handler.HandleClose has run.
func (l *Link) Run(ctx context.Context) error {
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
	stop := context.AfterFunc(ctx, func() { l.closeWith(ctx.Err()) })
	defer stop()
	l.stall = time.AfterFunc(time.Hour, func() {
		l.log.Warn("peer stalled; closing link", "timeout", l.opts.StallTimeout)
		l.closeWithMode(&CloseError{Code: StatusStalled, Reason: fmt.Sprintf("peer did not read for %s", l.opts.StallTimeout)}, true)
	})
	l.stall.Stop()
	go l.writeLoop()
	err := l.readLoop()
	l.mu.Lock()
	if l.mdTimer != nil {
		l.mdTimer.Stop()
	}
	l.mu.Unlock()
	l.closeWith(err)
	<-l.writerDone
	err = l.Err()
	l.log.Debug("link closed", "err", err)
	l.h.HandleClose(l, err)
	return err
}

func (l *Link) readLoop() error {
	for {
		// No context: the transport would register a cancellation per
		// read. Closing the connection is what ends a blocked read.
		b, err := l.conn.Read(context.Background())
		if err != nil {
			select {
			case <-l.done:
				return l.Err()
			default:
			}
			return err
		}
		l.stats.BytesIn.Add(uint64(len(b)))
		m, err := DecodeMessage(b)
		if err != nil {
			l.log.Debug("bad message", "err", err)
			return err
		}
		k := kindOf(m.Type)
		l.stats.MessagesIn[k].Add(1)
		switch m.Type {
		case TypeWorldChange:
			wc, err := l.opts.Limits.DecodeWorldChange(m.Data)
			if err != nil {
				l.log.Debug("bad worldChange", "err", err)
				return err
			}
			l.stats.RecordsIn.Add(uint64(len(wc.Changes)))
			l.h.HandleWorldChange(l, wc)
		case TypeRequestRefresh:
			l.h.HandleRequestRefresh(l)
		case TypeRequestMetadata:
			l.SendMetadata()
		case TypeMetadata, TypeMetadataChange:
			md, err := l.opts.Limits.DecodeMetadata(m.Data)
			if err != nil {
				l.log.Debug("bad metadata", "err", err)
				return err
			}
			l.mu.Lock()
			l.md, l.hasMD = md, true
			l.dialect = m.Type
			if l.mdTimer != nil {
				l.mdTimer.Stop()
				l.mdTimer = nil
			}
			l.mu.Unlock()
			l.h.HandleMetadata(l, md)
		case TypeRequestLessData, TypeRequestMoreData:
			l.scaleInterval(m.Type == TypeRequestLessData)
		default:
			// Ignored and counted: newer peers may speak types we lack.
			l.log.Debug("ignoring unknown message type", "type", m.Type)
		}
	}
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

func (l *Link) writeLoop() {
	defer close(l.writerDone)
	var pingC <-chan time.Time
	if _, ok := l.conn.(Pinger); ok && l.opts.PingInterval > 0 {
		t := time.NewTicker(l.opts.PingInterval)
		defer t.Stop()
		pingC = t.C
	}
	var batch Batch
	var timer *time.Timer
	for {
		select {
		case <-l.done:
			return
		case <-pingC:
			l.ping()
			continue
		case <-l.wake:
		}
		// Wait for the tick: at most one flush per interval, so everything
		// that arrives meanwhile is coalesced.
		l.mu.Lock()
		next := l.lastFlush.Add(l.interval)
		l.mu.Unlock()
		if d := time.Until(next); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-l.done:
				return
			case <-timer.C:
			}
		}
		if err := l.flush(&batch); err != nil {
			l.closeWith(err)
			return
		}
	}
}

func (l *Link) ping() {
	p := l.conn.(Pinger)
	l.mu.Lock()
	if l.pinging {
		l.mu.Unlock()
		return
	}
	l.pinging = true
	l.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.StallTimeout)
		defer cancel()
		err := p.Ping(ctx)
		l.mu.Lock()
		l.pinging = false
		l.mu.Unlock()
		if err != nil {
			l.log.Info("peer did not answer a keepalive ping; closing link", "timeout", l.opts.StallTimeout)
			l.closeWithMode(&CloseError{Code: StatusGoingAway, Reason: "keepalive ping failed"}, true)
		}
	}()
}

// flush writes pending control messages, then pending changes.
func (l *Link) flush(batch *Batch) error {
	// Drain before reading the control flags: a change queued after a flag
	// was set (say, a proxy's new client's object after the metadata that
	// announces the client) must never overtake that control message.
	l.queue.Drain(batch)
	l.mu.Lock()
	sendMD, reqMD, reqRefresh, dialect := l.sendMD, l.reqMD, l.reqRefresh, l.dialect
	l.sendMD, l.reqMD, l.reqRefresh = false, false, false
	l.lastFlush = time.Now()
	l.mu.Unlock()

	bp := framePool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			framePool.Put(bp)
		}
	}()
	if sendMD {
		*bp = AppendMetadata((*bp)[:0], dialect, l.h.LocalMetadata(l))
		if err := l.write(*bp, KindMetadata); err != nil {
			return err
		}
	}
	if reqMD {
		if err := l.write(AppendRequest((*bp)[:0], TypeRequestMetadata), KindRequestMetadata); err != nil {
			return err
		}
	}
	if reqRefresh {
		if err := l.write(AppendRequest((*bp)[:0], TypeRequestRefresh), KindRequestRefresh); err != nil {
			return err
		}
	}
	if batch.Empty() {
		return nil
	}
	ts := time.Now().UnixMilli()
	if err := l.writeRecords(bp, batch.First, ts, batch.Refreshed && len(batch.Second) == 0, true); err != nil {
		return err
	}
	if len(batch.Second) > 0 {
		if err := l.writeRecords(bp, batch.Second, ts, batch.Refreshed, false); err != nil {
			return err
		}
	}
	clear(batch.First)
	clear(batch.Second)
	return nil
}

// writeRecords sends recs in as few worldChange messages as MaxFrameBytes
// allows, assembled from the records' shared encodings.
func (l *Link) writeRecords(bp *[]byte, recs []*Record, ts int64, refreshed, allowEmpty bool) error {
	buf := AppendWorldChangeHeader((*bp)[:0], ts)
	head := len(buf)
	n := 0
	for _, r := range recs {
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
