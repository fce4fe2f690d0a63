package peer

import (
	"slices"
	"sync"
	"time"

	"github.com/solipsism/mesh/gameworld"
)

// The outbound side of a link: what the node offers (records with their
// verdicts, control messages) is queued here under outMu, coalesced per
// object when the writer is behind, and handed to the writer.

// SendMetadata sends the peer md, after every record offered so far and
// before every record offered later.
func (l *Link) SendMetadata(md Metadata) { l.control(flagSendMD, md) }

// RequestMetadata asks the peer for its metadata.
func (l *Link) RequestMetadata() { l.control(flagReqMD, Metadata{}) }

// RequestRefresh asks the peer to send all its relevant objects.
func (l *Link) RequestRefresh() { l.control(flagReqRefresh, Metadata{}) }

// SendMetadataPrompt sends the peer md at the next write, ahead of records
// and queues offered before it, for metadata whose meaning does not
// depend on the records around it (the resume tokens and refusals a node
// hands a downstream peer): a link working through a burst then tells it
// within a slice rather than after the whole burst. Refusals (Refused,
// Taken) of prompt metadata not yet written are kept. If metadata is already waiting in
// order (the handshake's, say), md goes in order after it, as
// SendMetadata sends it.
func (l *Link) SendMetadataPrompt(md Metadata) {
	l.outMu.Lock()
	inOrder := !l.writing || len(l.outbox) == 0
	for _, it := range l.outbox {
		inOrder = inOrder || it.flags&flagSendMD != 0
	}
	if inOrder || l.closed {
		l.outMu.Unlock()
		l.SendMetadata(md)
		return
	}
	defer l.outMu.Unlock()
	if l.prompt != nil {
		md.Refused = union(md.Refused, l.prompt.Refused)
		md.Taken = union(md.Taken, l.prompt.Taken)
	}
	l.prompt = &md
}

// union returns a with the elements of b it lacks.
func union(a, b []string) []string {
	for _, id := range b {
		if !slices.Contains(a, id) {
			a = append(a, id)
		}
	}
	return a
}

// Announce sends the peer md, our metadata with a new identifierChain (a
// world joined or left behind us), in order with the records around it as
// SendMetadata does, except while the link works through a burst: then a
// world that joined is announced at once (records of it come after), one
// that left is announced after every record queued before this call (its
// removes), and records offered meanwhile of other worlds go with the next
// slice instead of waiting for the whole burst behind a barrier. Until its
// departure is told, a world that left stays in the chains announced; one
// that joins again before then is announced in order.
func (l *Link) Announce(md Metadata) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.closed {
		return
	}
	chain := make(map[string]bool, len(md.IdentifierChain))
	for _, id := range md.IdentifierChain {
		chain[id] = true
	}
	told := l.told
	l.told = chain
	var q *queue
	if len(l.outbox) == 1 && l.writing {
		if it := l.outbox[0]; it.q != nil && it.flags == 0 && it.msgs == nil && it.q.len() > sliceEntries {
			q = it.q
		}
	}
	rejoined := false
	for id := range chain {
		rejoined = rejoined || l.left[id]
	}
	if told == nil || q == nil || rejoined {
		l.controlLocked(flagSendMD, md)
		return
	}
	for id := range told {
		if !chain[id] {
			if l.left == nil {
				l.left = map[string]bool{}
			}
			l.left[id] = true
			q.markAnnounce()
		}
	}
	l.announced = &md
	now := md
	now.IdentifierChain = slices.Clone(md.IdentifierChain)
	for id := range l.left {
		now.IdentifierChain = append(now.IdentifierChain, id)
	}
	l.prompt = &now
}

// takeAnnouncedLocked returns the metadata a queue's announce mark sends: the
// latest announced, whose departures are now told. outMu must be held.
func (l *Link) takeAnnouncedLocked() *Metadata {
	md := l.announced
	l.announced, l.left = nil, nil
	return md
}

func (l *Link) control(f uint8, md Metadata) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.controlLocked(f, md)
}

func (l *Link) controlLocked(f uint8, md Metadata) {
	if l.closed {
		return
	}
	it := l.barrierLocked()
	if it == nil {
		return
	}
	it.appOnly = false
	it.flags |= f
	if f == flagSendMD {
		it.md = md
	}
	l.startWriterLocked()
}

// barrierLocked returns the item at the outbox's tail for control messages,
// adding one after records or a queue: what is offered later goes after
// them. It returns nil if the link was cut off. outMu must be held.
func (l *Link) barrierLocked() *item {
	if it := l.tailLocked(); it != nil && it.recs == nil && it.q == nil {
		return it
	}
	return l.appendLocked(&item{})
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
	if n := len(l.outbox); n >= 2 && l.outbox[n-1].appOnly && l.outbox[n-2].q != nil {
		// Behind ephemeral messages alone, records join the queue before
		// them: a message must follow the changes made before it, and may
		// follow later ones too. Otherwise a sender that alternates
		// changes and messages would add two items per message, and a
		// peer reading slower would be cut off as fallen behind.
		return l.outbox[n-2].q
	}
	it := l.appendLocked(&item{q: getQueue(), at: time.Now()})
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
	// A burst goes through the queue, which sends it a slice at a time
	// with others' live changes first; a tick of many peers' changes
	// (spread) is such live changes, and goes as it is, a slice a message.
	if now := time.Now(); unique && (len(recs) <= sliceEntries || len(recs) <= maxDirect && spread(recs)) && !l.writing && len(l.outbox) == 0 && !now.Before(l.dueLocked()) {
		direct = &item{recs: *recsPool.Get().(*[]*Record), at: now}
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
		case Forget:
			for _, it := range l.outbox {
				if it.q != nil {
					it.q.forget(r.Slot, r.ID)
				}
			}
			l.known.remove(r.Slot)
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
		if r.Type == gameworld.Transfer && !r.Properties.IsZero() {
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
			if len(direct.recs) == sliceEntries {
				l.outbox = append(l.outbox, direct)
				direct = &item{recs: *recsPool.Get().(*[]*Record)}
			}
			direct.recs = append(direct.recs, r)
			continue
		}
		if q == nil {
			if q = l.openQueueLocked(); q == nil {
				return
			}
		}
		if q.push(r, &l.known) {
			l.coalesced++
		}
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

// maxDirect bounds what an idle link takes as it is, in slices of
// sliceEntries (its outbox holds at most maxOutbox items).
const maxDirect = 8 * sliceEntries

// spread reports whether recs are changes of many owners, none with
// liveEntries or more in a row: a tick's live changes, not one peer's
// burst (a burst comes in one message, so in one run of the log). It
// compares neighbours' owners only, without a map.
func spread(recs []*Record) bool {
	run := 0
	for i := 1; i < len(recs); i++ {
		if recs[i].Owner != recs[i-1].Owner {
			run = 0
		} else if run++; run >= liveEntries {
			return false
		}
	}
	return true
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
		q.markRefreshed()
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

// paceFrom returns when the message of it, about to be written, could
// have gone at the earliest: when its first records were offered, or when
// the link was due if that was later, and never later than now. The next
// message is due an interval after that. Counted from the moment of the
// write instead, a node whose worker comes late to a link (a busy tick)
// would find it not due at the next tick, queue its records and write
// them later still, tick after tick. outMu must be held.
func (l *Link) paceFrom(it *item, now time.Time) time.Time {
	if it.at.IsZero() {
		return now
	}
	from := it.at
	if due := l.dueLocked(); due.After(from) {
		from = due
	}
	if from.After(now) {
		return now
	}
	return from
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

// Drained reports whether everything offered to the link has been written
// (handed to the connection), or the link has closed.
func (l *Link) Drained() bool {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	return l.closed || (!l.writing && len(l.outbox) == 0)
}
