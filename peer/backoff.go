package peer

import (
	"math/rand/v2"
	"time"
)

// Backoff returns the delay before redialling after failures failed
// attempts: exponential from min to max, with "equal jitter" (half fixed,
// half random), so that many links cut off at once (the proxies of a
// server that restarted, the members of a mesh) do not redial in lockstep.
func Backoff(failures int, min, max time.Duration) time.Duration {
	d := min
	for i := 0; i < failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(half+1)
}
