package wiretest

import (
	"runtime"
	"sync"
)

// BusyCores keeps every core busy until the returned func is called, for
// tests that must hold under CPU contention.
func BusyCores() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
