package peer

import (
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
)

// TestPaceFrom: the next message is due an interval after the moment
// the last one could have gone: its records' offer, or when the link was
// due if later, never later than the write.
func TestPaceFrom(t *testing.T) {
	const tick = 100 * time.Millisecond // due half a tick after the last
	now := time.Now()
	tests := []struct {
		name          string
		lastFlush, at time.Duration // before now; at 0: none
		want          time.Duration
	}{
		{"no offer time (a burst's next slice)", 200 * time.Millisecond, 0, 0},
		{"offered after the link was due", 200 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond},
		{"offered before the link was due", 80 * time.Millisecond, 60 * time.Millisecond, 30 * time.Millisecond},
		{"due only after now", 10 * time.Millisecond, 5 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, _ := startLink(t, LinkOptions{Tick: tick})
			l.outMu.Lock()
			defer l.outMu.Unlock()
			l.lastFlush = now.Add(-tt.lastFlush)
			it := &item{}
			if tt.at > 0 {
				it.at = now.Add(-tt.at)
			}
			if got := l.paceFrom(it, now); !got.Equal(now.Add(-tt.want)) {
				t.Fatalf("paced from %v before now, want %v", now.Sub(got), tt.want)
			}
		})
	}
}

// TestLateWriterKeepsPace: a message whose writer came late (a busy
// node's worker; here it waits three quarters of a tick for the link)
// leaves the link due at the next tick, because its pace counts from when
// the records were offered. Counted from the write, the next tick's
// records found the link not due, waited in a queue for the rest of half
// a tick, and their writer came later again.
func TestLateWriterKeepsPace(t *testing.T) {
	const tick = 200 * time.Millisecond
	l, _, far := startLink(t, LinkOptions{Tick: tick})
	l.Offer([]*Record{rec(gameworld.Add, "a")}, func(int) Verdict { return Echo }, nil, true)
	for try := 0; try < 20; try++ {
		offered := time.Now()
		l.Offer([]*Record{update("a", try)}, sendAll, nil, true)
		l.outMu.Lock()
		if !(len(l.outbox) == 1 && l.outbox[0].recs != nil) {
			// The writer took the message before the test could hold it
			// back: again, a tick later.
			l.outMu.Unlock()
			readMsg(t, far)
			time.Sleep(tick)
			continue
		}
		time.Sleep(tick * 3 / 4) // the writer waits for the link
		l.outMu.Unlock()
		readMsg(t, far)
		time.Sleep(time.Until(offered.Add(tick))) // the next tick
		l.outMu.Lock()
		due := l.dueLocked()
		l.outMu.Unlock()
		if now := time.Now(); now.Before(due) {
			t.Fatalf("at the next tick the link is due only %v later", due.Sub(now))
		}
		return
	}
	t.Fatal("the writer always took the message before the test could hold it back")
}
