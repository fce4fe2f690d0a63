package loop

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx is done, and returns then: the
// loop of a node's periodic jobs (a memory check, say). A call that runs
// late is not made up for: the next one follows the ticker.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	EveryWhileBusy(ctx, interval, nil, func() bool { fn(); return true })
}

// EveryWhileBusy calls fn every interval until ctx is done, as Every does,
// except that after a call that reports nothing left to do (fn returns
// false: a bridge without clients) it waits for wake before the next, so
// that a loop with nothing to do costs no wake-ups. Whoever gives fn
// something to do again sends on wake without waiting (see Wake).
func EveryWhileBusy(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func() (busy bool)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if fn() {
			continue
		}
		t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		t.Reset(interval)
	}
}

// Wake sends on a channel of capacity one without waiting: a wake-up
// already pending is enough.
func Wake(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
