package peer

import (
	"sync"
	"time"
)

// Workers runs functions on goroutines that it keeps for a while after
// they finish, for the next function. Links hand it the short jobs they
// have all the time — writing a tick's records, decoding a message — that
// would otherwise each start a goroutine and grow its stack anew. A worker
// left without a job for IdleTimeout ends, so a quiet node keeps none.
//
// The zero value is ready to use. Go is safe for concurrent use. There is
// no bound on the number of workers: a job that blocks (a write to a
// stalled peer) holds its worker, and the next job gets another one.
type Workers struct {
	// IdleTimeout is how long a worker waits for a job before it ends.
	// Zero means one second.
	IdleTimeout time.Duration

	mu   sync.Mutex
	idle []chan func()
}

// Go runs f on a worker.
func (w *Workers) Go(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- f
		return
	}
	w.mu.Unlock()
	go w.work(f)
}

func (w *Workers) work(f func()) {
	timeout := w.IdleTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ch := make(chan func())
	t := time.NewTimer(timeout)
	t.Stop()
	for {
		f()
		f = nil
		w.mu.Lock()
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		t.Reset(timeout)
		select {
		case f = <-ch:
			t.Stop()
			continue
		case <-t.C:
		}
		w.mu.Lock()
		for i, c := range w.idle {
			if c == ch {
				w.idle = append(w.idle[:i], w.idle[i+1:]...)
				w.mu.Unlock()
				return
			}
		}
		w.mu.Unlock()
		// Taken off the idle list just now: a job is on its way.
		f = <-ch
	}
}
