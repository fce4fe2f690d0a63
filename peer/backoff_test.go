package peer_test

import (
	"testing"
	"time"

	"github.com/solipsism/mesh/peer"
)

// Backoff doubles from min per failure up to max, and jitters the second
// half of each delay, so that links cut off together redial apart.
func TestBackoff(t *testing.T) {
	const min, max = 100 * time.Millisecond, 5 * time.Second
	for _, tc := range []struct {
		failures int
		full     time.Duration // the delay before jitter
	}{
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{3, 800 * time.Millisecond},
		{6, 5 * time.Second}, // 6.4 s, capped
		{1000, 5 * time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := peer.Backoff(tc.failures, min, max)
			if d < tc.full/2 || d > tc.full {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", tc.failures, d, tc.full/2, tc.full)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Backoff(%d) took only %d values in 200 draws: not jittered", tc.failures, len(seen))
		}
	}
}
