package store

import (
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"
)

// WriterOptions configures a Writer. The zero value retries failed writes
// every second and logs nothing.
type WriterOptions struct {
	// Retry is how long a failed write waits before it is tried again
	// (with whatever was queued meanwhile). Zero means one second.
	Retry time.Duration
	// Logger receives a warning when writes start failing and a note
	// when they succeed again; nil discards them.
	Logger *slog.Logger
	// Written is called after each write with the changes it made and
	// its error (nil on success); it must not block.
	Written func(puts, deletes int, err error)
}

// Writer writes batches to a Store on a goroutine of its own, merging
// what is queued while a write is under way into the next one, so that
// Queue never waits for the disk. A failed write (a full disk, say) is
// kept and tried again; nothing queued is dropped. Its methods are safe
// for concurrent use.
type Writer struct {
	s    Store
	opts WriterOptions
	log  *slog.Logger

	mu      sync.Mutex
	pending *merged
	// writing counts the changes of the write under way.
	writing int
	closed  bool
	failing bool
	wake    chan struct{}
	done    chan struct{}
}

// merged is the queued changes, one entry per object.
type merged struct {
	id     string
	secret []byte
	put    map[string]Object
	del    map[string]bool
	meta   map[string][]byte
}

func (m *merged) add(b Batch) {
	if b.Identifier != "" {
		m.id = b.Identifier
	}
	if b.ResumeSecret != nil {
		m.secret = b.ResumeSecret
	}
	for _, o := range b.Put {
		m.put[o.ID] = o
		delete(m.del, o.ID)
	}
	for _, id := range b.Delete {
		delete(m.put, id)
		m.del[id] = true
	}
	for k, v := range b.Meta {
		m.meta[k] = v
	}
}

func (m *merged) batch() Batch {
	b := Batch{Identifier: m.id, ResumeSecret: m.secret, Meta: maps.Clone(m.meta)}
	for _, o := range m.put {
		b.Put = append(b.Put, o)
	}
	for id := range m.del {
		b.Delete = append(b.Delete, id)
	}
	if len(b.Meta) == 0 {
		b.Meta = nil
	}
	return b
}

func newMerged() *merged {
	return &merged{put: map[string]Object{}, del: map[string]bool{}, meta: map[string][]byte{}}
}

// NewWriter starts a writer for s. Close it to write what is queued and
// stop.
func NewWriter(s Store, opts WriterOptions) *Writer {
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{s: s, opts: opts, log: log, pending: newMerged(), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.loop()
	return w
}

// Queue adds b to what the next write makes.
func (w *Writer) Queue(b Batch) {
	if b.Empty() {
		return
	}
	w.mu.Lock()
	if !w.closed {
		w.pending.add(b)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Pending returns the number of object changes not yet written (queued,
// or in the write under way).
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending.put) + len(w.pending.del) + w.writing
}

func (w *Writer) loop() {
	defer close(w.done)
	for {
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		ok := w.flush()
		if closed {
			return // this flush had everything queued before Close
		}
		if !ok {
			select {
			case <-time.After(w.opts.Retry):
			case <-w.wake:
			}
			continue
		}
		<-w.wake
	}
}

// flush writes what is pending; it reports whether it succeeded (or had
// nothing to write).
func (w *Writer) flush() bool {
	w.mu.Lock()
	p := w.pending
	if len(p.put)+len(p.del)+len(p.meta) == 0 && p.id == "" && p.secret == nil {
		w.mu.Unlock()
		return true
	}
	w.pending = newMerged()
	b := p.batch()
	w.writing = len(b.Put) + len(b.Delete)
	w.mu.Unlock()
	err := w.s.Save(b)
	if w.opts.Written != nil {
		w.opts.Written(len(b.Put), len(b.Delete), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writing = 0
	if err != nil {
		// Keep it, under what was queued since.
		p.add(w.pending.batch())
		w.pending = p
		if !w.failing {
			w.failing = true
			w.log.Warn("writing the world to the store failed; relaying goes on, and the write is retried", "err", err, "pending", len(p.put)+len(p.del))
		}
		return false
	}
	if w.failing {
		w.failing = false
		w.log.Info("writing the world to the store works again")
	}
	return true
}

// Close writes what is queued (one last try) and stops the writer. It
// does not close the Store.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.pending.put) + len(w.pending.del); n > 0 {
		return &UnwrittenError{Changes: n}
	}
	return nil
}

// UnwrittenError is returned by Close when the last write failed.
type UnwrittenError struct{ Changes int }

func (e *UnwrittenError) Error() string {
	return "store: the last write failed; changes to " + strconv.Itoa(e.Changes) + " objects are not on disk"
}
