package loop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEveryWhileBusy: the loop calls fn every interval while it reports
// work, makes no call after one that reports none until woken, and stops
// with its context, asleep or not.
func TestEveryWhileBusy(t *testing.T) {
	const iv = 2 * time.Millisecond
	var calls, busyFor atomic.Int64
	busyFor.Store(5)
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		EveryWhileBusy(ctx, iv, wake, func() bool { return calls.Add(1) < busyFor.Load() })
	}()
	waitCalls := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); calls.Load() < n; time.Sleep(iv) {
			if time.Now().After(deadline) {
				t.Fatalf("%d calls, want %d", calls.Load(), n)
			}
		}
	}
	waitCalls(5)
	time.Sleep(50 * iv)
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d calls after fn reported no work, want 5", n)
	}
	busyFor.Store(8)
	Wake(wake)
	waitCalls(8)
	time.Sleep(50 * iv)
	if n := calls.Load(); n != 8 {
		t.Fatalf("%d calls after fn reported no work again, want 8", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop while asleep")
	}
}
