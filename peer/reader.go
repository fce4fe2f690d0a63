package peer

import (
	"context"
	"errors"
	"io"
	"time"
)

// The inbound side of a link: Run's reading goroutine, which decodes each
// message (a worldChange as a stream) and hands it to the Handler.

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
	l.stall.Stop() // (armed by the last writes, it would keep the link for a while)
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

// process decodes and handles one message. A link that sends steadily
// (see steady) does so on its own reading goroutine; any other hands it to
// a worker and waits for it: decoding and routing grow a stack to many
// KiB, which the goroutine of a link that is mostly idle would otherwise
// keep for good. Handing a message over wakes a worker and wakes the
// reader again after it; on a lightly loaded node each wake-up is a
// thread woken from sleep, which cost a quarter of the node's CPU at 150
// clients moving at 5 Hz (BenchmarkScaleOut's quarter).
func (l *Link) process(r io.Reader) error {
	if l.steady(time.Now().UnixNano()) {
		return l.decode(r)
	}
	if l.processed == nil {
		l.processed = make(chan error, 1)
	}
	l.spawn(func() { l.processed <- l.decode(r) })
	return <-l.processed
}

// decode reads one message from r and handles it.
func (l *Link) decode(r io.Reader) error {
	m, err := l.opts.Limits.ReadMessage(r, l.readBytes, l.opts.ReadBurst, l.handleChanges)
	if err == nil {
		err = l.handle(m)
	}
	return err
}

// A link is steady once steadyRun messages in a row came each within
// steadyGap of the one before: a peer streaming changes, whose reading
// goroutine is busy anyway. A handshake (two or three messages at once)
// or an occasional message is not; a gap ends a run.
const (
	steadyRun = 8
	steadyGap = 250 * time.Millisecond
)

// steady notes a message's arrival at now (Unix nanoseconds) and reports
// whether the link is steady. Called only by the reading goroutine.
func (l *Link) steady(now int64) bool {
	if now-l.lastMsg > int64(steadyGap) {
		l.run = 0
	} else if l.run < steadyRun {
		l.run++
	}
	l.lastMsg = now
	return l.run >= steadyRun
}

func (l *Link) handleChanges(wc WorldChange) error {
	if l.recRate != nil && len(wc.Changes) > 0 {
		l.recRate.WaitN(context.Background(), min(len(wc.Changes), l.recRate.Burst())) //nolint:errcheck // never cancelled
	}
	l.stats.RecordsIn.Add(uint64(len(wc.Changes)))
	l.handling.Add(1)
	defer l.handling.Add(-1)
	l.h.HandleWorldChange(l, wc)
	return nil
}

// peerAlive reports whether the peer was heard from within d, or a
// message of it is being handled: the answer to a ping sent meanwhile
// waits behind what the peer sent before it, which this node is still
// reading.
func (l *Link) peerAlive(d time.Duration) bool {
	return l.handling.Load() > 0 || time.Since(time.Unix(0, l.heardAt.Load())) < d
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
	l.heardAt.Store(time.Now().UnixNano())
	if l.rate != nil {
		return l.rate.WaitN(context.Background(), n)
	}
	return nil
}

// handle acts on one message; a worldChange's records were handled as they
// were read.
func (l *Link) handle(m Message) error {
	l.stats.MessagesIn[kindOf(m.Type)].Add(1)
	l.handling.Add(1)
	defer l.handling.Add(-1)
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
		if !l.hasMD {
			close(l.mdReady)
		}
		l.md, l.hasMD = md, true
		l.transfers.Store(md.Has(FeatureOwnership))
		l.scopes.Store(md.Has(FeatureScopes))
		l.dialect = m.Type
		if l.mdTimer != nil {
			l.mdTimer.Stop()
			l.mdTimer = nil
		}
		l.mu.Unlock()
		l.h.HandleMetadata(l, md)
	case TypeRequestLessData, TypeRequestMoreData:
		l.scaleInterval(m.Type == TypeRequestLessData)
	case TypeDigest, TypeRequestRepair, TypeRepairing, TypeRepaired:
		dh, ok := l.h.(DigestHandler)
		if !ok {
			return nil
		}
		if m.Type == TypeDigest {
			d, err := DecodeDigest(m.Data)
			if err != nil {
				return err
			}
			dh.HandleDigest(l, d)
			return nil
		}
		r, err := DecodeRepair(m.Data)
		if err != nil {
			return err
		}
		dh.HandleRepair(l, m.Type, r)
	case TypeDeparted:
		dh, ok := l.h.(DepartedHandler)
		if !ok {
			return nil
		}
		d, err := l.opts.Limits.DecodeDeparted(m.Data)
		if err != nil {
			return err
		}
		dh.HandleDeparted(l, d)
	case TypeMessage:
		mh, ok := l.h.(AppMessageHandler)
		if !ok {
			return nil
		}
		am, err := l.opts.Limits.DecodeAppMessage(m.Data)
		if err != nil {
			return err
		}
		mh.HandleAppMessage(l, am)
	case TypeWorldChange, TypeScopeChange:
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
