package wiretest

import (
	"slices"
	"sync"
	"time"
)

// WatchGone checks every millisecond, until the returned function is
// called, whether each of ids is present, and returns (from that call)
// those that were ever missing, sorted: objects that blinked out.
func WatchGone(ids []string, present func(id string) bool) (stop func() []string) {
	var mu sync.Mutex
	gone := map[string]bool{}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			for _, id := range ids {
				if !present(id) {
					mu.Lock()
					gone[id] = true
					mu.Unlock()
				}
			}
		}
	}()
	var once sync.Once
	return func() []string {
		once.Do(func() { close(done); <-finished })
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for id := range gone {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
}
