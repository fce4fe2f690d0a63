package peer

import (
	"testing"
	"time"
)

// TestPacing: slices shrink toward sliceTarget of the peer's work, grow
// back when the peer is quick, and a long round trip alone never shrinks
// them.
func TestPacing(t *testing.T) {
	for _, tc := range []struct {
		name string
		rtt  time.Duration // keepalive answers seen before
		// perEntry is the peer's work per entry; each slice takes
		// rtt + entries*perEntry.
		perEntry time.Duration
		lo, hi   int // the slice size settles within
	}{
		{"a quick peer on loopback", 100 * time.Microsecond, time.Microsecond, maxSlice, maxSlice},
		{"a busy peer on loopback", 100 * time.Microsecond, 50 * time.Microsecond, minSlice, 600},
		{"a very busy peer", 100 * time.Microsecond, time.Millisecond, minSlice, minSlice},
		{"a quick peer across an ocean", 150 * time.Millisecond, time.Microsecond, maxSlice, maxSlice},
		{"a busy peer across an ocean", 150 * time.Millisecond, 50 * time.Microsecond, minSlice, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pacing
			p.observeRTT(tc.rtt)
			for range 30 {
				n := p.size()
				p.sliceTook(n, tc.rtt+time.Duration(n)*tc.perEntry)
			}
			if got := p.size(); got < tc.lo || got > tc.hi {
				t.Errorf("slices settle at %d entries, want %d to %d", got, tc.lo, tc.hi)
			}
		})
	}
	// One slow slice (a pause) does not shrink the next to nothing, and a
	// quick one after grows it back.
	var p pacing
	p.observeRTT(100 * time.Microsecond)
	p.sliceTook(maxSlice, time.Second)
	if got := p.size(); got < maxSlice/2 {
		t.Errorf("one slow slice shrank the next to %d", got)
	}
	for range 10 {
		p.sliceTook(p.size(), 200*time.Microsecond)
	}
	if got := p.size(); got != maxSlice {
		t.Errorf("after quick slices the size is %d, want %d", got, maxSlice)
	}
}
