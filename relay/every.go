package relay

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx is done, and returns then: the
// loop of every periodic job of a node and its bridges (a heartbeat, a
// snapshot tick, a memory check). A call that runs late is not made up
// for: the next one follows the ticker.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
