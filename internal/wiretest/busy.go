package wiretest

import (
	"runtime"
	"sync"
)

// BusyCores keeps all cores but one busy until the returned func is
// called, for tests that must hold under CPU contention. One is left: the
// test's own work then competes for it, while the tests of other packages
// that run meanwhile (go test runs packages in parallel) are not starved
// into timing out.
func BusyCores() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range max(1, runtime.NumCPU()-1) {
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
