package antientropy

import (
	"math/rand/v2"
	"time"

	"github.com/solipsism/mesh/peer"
)

// Link is one link's anti-entropy state. The zero value is a link that has
// not yet sent a digest.
type Link struct {
	next time.Time
	// asked is when a repair was last asked for; failed counts digests
	// that still differed right after a repair (the peer refused what was
	// sent, say), which space the next requests out.
	asked  time.Time
	failed int
	repair *repair
	// differed are the buckets that differed in the last digest: a
	// bucket is repaired only when it differs in two digests in a row, so
	// that changes crossing in flight (an ownership transfer decided
	// between the two sides' views) are not taken for divergence.
	differed map[int]bool
	of       int // buckets of the last digest
	// missing are ids a repair brought as missing (at most MaxMissing): if
	// the peer's own add of one arrives later, the object was late rather
	// than lost, and the digest overtook it.
	missing map[string]bool
	// lastIn and lastAsked are when the peer's last digest and repair
	// request were taken: each costs a pass over the world, so a peer
	// gets at most one of each per MinGap.
	lastIn, lastAsked time.Time
	// gaps are the buckets (of GapBuckets) of objects whose scope deltas
	// came with a gap; deferred is a repair request that came within
	// MinGap of the one before.
	gaps     map[int]bool
	deferred *peer.Repair
}

const (
	// RepairTimeout is how long a repair asked for may go unanswered
	// before the link compares digests again (a peer may drop a request
	// it got too soon after another).
	RepairTimeout = 10 * time.Second
	// MinGap is the least time between two digests, or two repair
	// requests, taken from one link.
	MinGap = 100 * time.Millisecond
	// Postpone is how long a digest waits when the link is busy (a
	// burst, a departure, a refresh answer under way, the budget spent).
	Postpone = time.Second
	// GapBuckets is how finely a gap's request names objects: a bucket of
	// 4,096 (the most a repair may name) holds the object and few others.
	GapBuckets = 4096
	// MaxMissing bounds the ids a link remembers a repair brought as
	// missing.
	MaxMissing = 4096
)

// Buckets is the number of buckets for a digest of n objects: about 16
// objects a bucket, a power of two, at most 1,024.
func Buckets(n int) int {
	b := 1
	for b < 1024 && b*16 < n {
		b *= 2
	}
	return b
}

// Due reports whether the link's digest is due at now.
func (l *Link) Due(now time.Time) bool { return !now.Before(l.next) }

// Spread reports whether the link has never been scheduled, and if so
// schedules its first digest at a random point of the next interval, so
// that links opened together digest apart.
func (l *Link) Spread(now time.Time, interval time.Duration) bool {
	if !l.next.IsZero() {
		return false
	}
	l.next = now.Add(rand.N(interval) + 1)
	return true
}

// Postpone puts the link's digest off by Postpone.
func (l *Link) Postpone(now time.Time) { l.next = now.Add(Postpone) }

// Sent schedules the next digest an interval after now.
func (l *Link) Sent(now time.Time, interval time.Duration) { l.next = now.Add(interval) }

// MakeDue makes the link's digest due at once.
func (l *Link) MakeDue(now time.Time) { l.next = now.Add(-time.Second) }

// Take reports whether a digest from the peer is taken at now: not within
// MinGap of the one before.
func (l *Link) Take(now time.Time) bool {
	if now.Sub(l.lastIn) < MinGap {
		return false
	}
	l.lastIn = now
	return true
}

// Compare compares our buckets with the peer's (of the same length) and
// returns those to repair: the ones that differ now and differed in the
// peer's digest before, of the same size.
func (l *Link) Compare(mine, theirs []uint64) []int {
	var differ []int
	before := l.differed
	l.differed = nil
	for i := range mine {
		if mine[i] == theirs[i] {
			continue
		}
		if l.differed == nil {
			l.differed = map[int]bool{}
		}
		l.differed[i] = true
		if before[i] && len(mine) == l.of {
			differ = append(differ, i)
		}
	}
	l.of = len(mine)
	if len(l.differed) == 0 {
		l.failed = 0
	}
	return differ
}

// Ask returns the repair request for the buckets to repair, or false when
// the link asked too recently: a request that followed another within two
// intervals means the one before failed, and each failure spaces the next
// by an interval more (at most 16).
func (l *Link) Ask(now time.Time, interval time.Duration, of int, buckets []int) (peer.Repair, bool) {
	if !l.asked.IsZero() && now.Sub(l.asked) < time.Duration(l.failed)*interval {
		return peer.Repair{}, false
	}
	if !l.asked.IsZero() && now.Sub(l.asked) < 2*interval {
		l.failed = min(l.failed+1, 16)
	}
	l.asked = now
	r := peer.Repair{Of: of, Buckets: buckets}
	l.repair = &repair{r: r, seen: map[string]bool{}, since: now}
	return r, true
}
