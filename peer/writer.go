package peer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// The writer: a goroutine that exists only while there is something to
// write; it takes batches from the outbox and encodes and writes them,
// with the link's pings.

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// writeOut is the writer goroutine: it writes the outbox in order, a queue
// once the link is due, and ends when the outbox is empty.
func (l *Link) writeOut() {
	defer l.writers.Done()
	bp := framePool.Get().(*[]byte)
	defer func() {
		// A frame grows to at most MaxFrameBytes and a record past it;
		// writers run on the worker pool, so the pool holds about one
		// such buffer per worker.
		if cap(*bp) <= 2*l.opts.MaxFrameBytes {
			framePool.Put(bp)
		}
	}()
	var batch Batch
	var timer *time.Timer
	bursting := false
	// unpaced: a wait for the peer timed out during this burst; the rest
	// of it goes without (see awaitPeer).
	unpaced := false
	for {
		l.outMu.Lock()
		if l.closed {
			l.outMu.Unlock()
			return
		}
		if md := l.prompt; md != nil {
			l.prompt = nil
			l.outMu.Unlock()
			*bp = AppendMetadata((*bp)[:0], l.Dialect(), *md)
			if err := l.write(*bp, KindMetadata); err != nil {
				l.closeWith(err)
				return
			}
			continue
		}
		if len(l.outbox) == 0 {
			l.writing = false
			l.outbox = nil // an idle link keeps no buffers
			l.outMu.Unlock()
			return
		}
		it := l.outbox[0]
		if l.opts.AwaitMetadata && (it.q != nil || it.recs != nil) && !l.metadataArrived() {
			if it.flags != 0 || len(it.msgs) > 0 {
				// Control messages (our metadata, a request for the
				// peer's) go; the records wait.
				ctl := &item{flags: it.flags, md: it.md, msgs: it.msgs}
				it.flags, it.msgs = 0, nil
				l.outMu.Unlock()
				if err := l.flushItem(bp, ctl, &Batch{}); err != nil {
					l.closeWith(err)
					return
				}
				continue
			}
			l.outMu.Unlock()
			select {
			case <-l.done:
				return
			case <-l.mdReady:
			}
			continue
		}
		if it.q != nil && !bursting {
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
		more := false
		var announce *Metadata
		if it.q != nil {
			more = it.q.drainSlice(&batch, sliceEntries)
			if batch.Announce {
				announce = l.takeAnnouncedLocked()
			}
		}
		// The rest of a burst follows as soon as the peer has read this
		// slice: the wait for its answer paces it.
		bursting = more
		if !more {
			unpaced = false
		}
		if more {
			// The rest of the queue stays at the head of the outbox (and
			// goes on coalescing what arrives for it); its control
			// messages went with this slice.
			it = &item{flags: it.flags, md: it.md, msgs: it.msgs, q: it.q}
			l.outbox[0].flags, l.outbox[0].msgs = 0, nil
		} else {
			l.outbox[0] = nil
			l.outbox = l.outbox[1:]
			if it.q != nil {
				putQueue(it.q) // drained (batch holds its records)
			}
		}
		if it.recs != nil || it.q != nil {
			l.lastFlush = l.paceFrom(it, time.Now())
		}
		l.outMu.Unlock()
		// A slice's worth of records, whether the rest of a burst follows
		// or comes in later (a departure taken a slice at a time feeds
		// the queue as it goes), waits for the peer to read it too:
		// otherwise slices written a tick apart pile up in socket buffers
		// ahead of live changes whenever the peer reads slower.
		full := len(batch.First)+len(batch.Second)+len(it.recs) >= sliceEntries
		err := l.flush(bp, it, &batch, announce)
		batch.reset()
		if it.recs != nil {
			clear(it.recs)
			recs := it.recs[:0]
			recsPool.Put(&recs)
		}
		if err == nil && (more || full) && !unpaced {
			var paced bool
			paced, err = l.awaitPeer()
			unpaced = !paced
		}
		if err != nil {
			l.closeWith(err)
			return
		}
	}
}

// sliceEntries is how many objects' changes a link sends at once from a
// queue that has fallen behind; see queue.drainSlice.
const sliceEntries = 2048

// awaitPeer waits until the peer has read everything written so far (the
// answer to a ping follows it), so that a burst is paced by what the peer
// takes in rather than piled up in socket buffers ahead of live changes.
// It waits at most maxPaceWait (or the stall timeout, if shorter) and
// reports whether the answer came: if not, the rest of the burst goes
// unpaced, held back only by the connection's own flow control. The
// answer is late when the peer reads slowly, or when this node reads the
// peer slowly (the pong waits behind what the peer sent before it); in
// either case waiting on gains nothing. A peer that stopped reading is cut
// off by the stall timer of a blocked write or by the keepalive, as
// without pacing.
func (l *Link) awaitPeer() (paced bool, err error) {
	p, ok := l.conn.(Pinger)
	if !ok {
		return true, nil
	}
	wait := min(maxPaceWait, l.opts.StallTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		select {
		case <-l.done:
			return false, l.Err()
		default:
		}
		l.logger().Debug("peer slow to answer during a burst; sending the rest unpaced", "waited", wait)
		return false, nil
	}
	return true, nil
}

// maxPaceWait bounds awaitPeer's wait.
const maxPaceWait = 5 * time.Second

// pingDelay is the ping interval with ±25% jitter: links opened together
// (a reconnect storm, a load test) would otherwise ping together, each ping
// holding a goroutine until its pong, and all at once.
func (l *Link) pingDelay() time.Duration {
	iv := l.opts.PingInterval
	return iv*3/4 + rand.N(iv/2+1)
}

// ping checks the peer is alive, from the ping timer's goroutine, and
// re-arms the timer. A peer that does not answer within the stall timeout,
// and was not heard from meanwhile, is cut off.
func (l *Link) ping() {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.StallTimeout)
	defer cancel()
	if err := l.conn.(Pinger).Ping(ctx); err != nil {
		select {
		case <-l.done:
			return
		default:
		}
		if l.peerAlive(l.opts.StallTimeout) {
			// The pong is behind messages this node has yet to read: a
			// busy node must not cut off the peers it is slow to serve.
			l.logger().Debug("keepalive answer late, but the peer is sending; keeping the link")
			l.outMu.Lock()
			if !l.closed {
				l.pingTimer.Reset(l.pingDelay())
			}
			l.outMu.Unlock()
			return
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
// (recs as one worldChange, split if large) or its queue's batch, then
// announce if not nil.
func (l *Link) flush(bp *[]byte, it *item, batch *Batch, announce *Metadata) error {
	if err := l.flushItem(bp, it, batch); err != nil || announce == nil {
		return err
	}
	*bp = AppendMetadata((*bp)[:0], l.Dialect(), *announce)
	return l.write(*bp, KindMetadata)
}

func (l *Link) flushItem(bp *[]byte, it *item, batch *Batch) error {
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
	for _, msg := range it.msgs {
		k := kindOfMessage(msg)
		if err := l.write(msg, k); err != nil {
			return err
		}
		if k == KindMessage {
			l.sentAppMessage(len(msg))
		}
	}
	ts := time.Now().UnixMilli()
	if len(it.recs) > 0 {
		if err := l.writeRecords(bp, it.recs, ts, false, false); err != nil {
			return err
		}
	}
	if len(batch.First) == 0 && len(batch.Second) == 0 && !batch.Refreshed {
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
// allows, assembled from the records' shared encodings; or, to a peer that
// takes scopes, records that all update scopes alone as scopeChange
// messages (docs/protocol.md, "Scopes"): a block game's tick in about
// half the bytes.
func (l *Link) writeRecords(bp *[]byte, recs []*Record, ts int64, refreshed, allowEmpty bool) error {
	scopes := l.scopes.Load()
	compact := scopes && !refreshed && compactable(recs)
	header := func(dst []byte) []byte {
		if compact {
			return append(dst, `["`+TypeScopeChange+`",{`...)
		}
		return AppendWorldChangeHeader(dst, ts)
	}
	trailer := func(dst []byte, refreshed bool) []byte {
		if compact {
			return append(dst, "}]"...)
		}
		return AppendWorldChangeTrailer(dst, refreshed)
	}
	buf := header((*bp)[:0])
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
		enc := r.EncodedFor(scopes)
		if compact {
			enc = r.scopeEntry()
		}
		if n > 0 && len(buf)+len(enc)+32 > l.opts.MaxFrameBytes {
			buf = trailer(buf, false)
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
	buf = trailer(buf, refreshed)
	*bp = buf
	if err := l.write(buf, KindWorldChange); err != nil {
		return err
	}
	l.stats.RecordsOut.Add(uint64(n))
	return nil
}

// metadataArrived reports whether the peer's metadata has arrived.
func (l *Link) metadataArrived() bool {
	select {
	case <-l.mdReady:
		return true
	default:
		return false
	}
}

// compactable reports whether recs can go as scopeChange messages: all
// update scopes alone, each of another object. Objects are told apart by
// slot, without hashing their ids: a batch holds one record per slot, and
// an id in two slots (removed, then added again) comes with its remove.
func compactable(recs []*Record) bool {
	if len(recs) == 0 {
		return false
	}
	var arr [128]uint32
	slots := arr[:0]
	for _, r := range recs {
		if !scopesOnly(&r.Change) {
			return false
		}
		slots = append(slots, r.Slot)
	}
	slices.Sort(slots)
	for i := 1; i < len(slots); i++ {
		if slots[i] == slots[i-1] {
			return false
		}
	}
	return true
}

func (l *Link) write(p []byte, k MessageKind) error {
	l.writeSince.Store(time.Now().UnixNano())
	if !l.stallArmed.Load() && l.stallArmed.CompareAndSwap(false, true) {
		l.stall.Reset(l.opts.StallTimeout)
	}
	err := l.conn.Write(context.Background(), p)
	l.writeSince.Store(0)
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

// stalled is the stall timer's function. The timer is armed by the first
// write after it last fired, not reset around every write (two operations
// on the runtime's timer heap for each of a busy link's writes): when it
// fires it checks the write in progress, if any, and closes the link if
// that write began StallTimeout ago or more, else waits for the rest of it.
// A link that stops writing leaves the timer unarmed.
func (l *Link) stalled() {
	now := time.Now().UnixNano()
	since := l.writeSince.Load()
	if since == 0 {
		l.stallArmed.Store(false)
		// A write that began meanwhile may have seen the timer armed.
		if l.writeSince.Load() == 0 || !l.stallArmed.CompareAndSwap(false, true) {
			return
		}
		since, now = l.writeSince.Load(), time.Now().UnixNano()
		if since == 0 {
			since = now
		}
	}
	if wait := int64(l.opts.StallTimeout) - (now - since); wait > 0 {
		l.stall.Reset(time.Duration(wait))
		return
	}
	l.logger().Warn("peer stalled; closing link", "timeout", l.opts.StallTimeout)
	l.closeWithMode(&CloseError{Code: StatusStalled, Reason: fmt.Sprintf("peer did not read for %s", l.opts.StallTimeout)}, true)
}
