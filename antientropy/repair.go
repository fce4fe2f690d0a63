package antientropy

import (
	"slices"
	"time"

	"github.com/solipsism/mesh/peer"
)

// repair is a repair under way on a link: the buckets asked for, and the
// objects the answer has brought so far.
type repair struct {
	r    peer.Repair
	seen map[string]bool
	// answering is set once the peer's "repairing" arrived: records before
	// it were sent before the peer had our request (live changes in
	// flight, a burst's adds say), and repair nothing.
	answering bool
	since     time.Time
}

// Repairing reports whether a repair asked for is in flight (asked for
// within RepairTimeout); one older is forgotten, to be asked again.
func (l *Link) Repairing(now time.Time) bool {
	if l.repair != nil && now.Sub(l.repair.since) > RepairTimeout {
		l.repair = nil
	}
	return l.repair != nil
}

// Pending reports whether a repair has been asked for and not ended,
// however long ago.
func (l *Link) Pending() bool { return l.repair != nil }

// Begin notes the peer's "repairing" for r: the records that follow, until
// "repaired", are the answer to the repair asked for, if r is it.
func (l *Link) Begin(r peer.Repair) {
	if rs := l.repair; rs != nil && rs.r.Of == r.Of && slices.Equal(rs.r.Buckets, r.Buckets) {
		rs.answering = true
	}
}

// Answer returns the repair whose answer is arriving, if one is.
func (l *Link) Answer() (peer.Repair, bool) {
	if l.repair == nil || !l.repair.answering {
		return peer.Repair{}, false
	}
	return l.repair.r, true
}

// Saw notes an object the answer brought.
func (l *Link) Saw(id string) { l.repair.seen[id] = true }

// End ends the answer on the peer's "repaired": it returns the repair and
// whether an object was among the answer's, or false when no answer was
// arriving.
func (l *Link) End() (r peer.Repair, seen func(id string) bool, ok bool) {
	rs := l.repair
	if rs == nil || !rs.answering {
		return peer.Repair{}, nil, false
	}
	l.repair = nil
	return rs.r, func(id string) bool { return rs.seen[id] }, true
}

// NoteMissing remembers ids a repair brought as missing (up to MaxMissing).
func (l *Link) NoteMissing(ids []string) {
	if l.missing == nil {
		l.missing = map[string]bool{}
	}
	for _, id := range ids {
		if len(l.missing) >= MaxMissing {
			return
		}
		l.missing[id] = true
	}
}

// Late reports whether the peer's own add of id is one of an object a
// repair brought as missing: it was on its way when the digest said it
// was missing. Each id is reported once.
func (l *Link) Late(id string) bool {
	if !l.missing[id] {
		return false
	}
	delete(l.missing, id)
	return true
}

// Waiting reports whether any id a repair brought as missing is still
// remembered.
func (l *Link) Waiting() bool { return len(l.missing) > 0 }

// Gap notes an object (by its id hash) whose scope delta came with a gap.
func (l *Link) Gap(idHash uint64) {
	if l.gaps == nil {
		l.gaps = map[int]bool{}
	}
	l.gaps[int(idHash%GapBuckets)] = true
}

// GapRequest returns the request for the gaps noted, if there are some and
// no repair is in flight, and counts it as the repair asked for.
func (l *Link) GapRequest(now time.Time) (peer.Repair, bool) {
	if len(l.gaps) == 0 || l.Repairing(now) {
		return peer.Repair{}, false
	}
	r := peer.Repair{Of: GapBuckets}
	for b := range l.gaps {
		r.Buckets = append(r.Buckets, b)
	}
	slices.Sort(r.Buckets)
	l.gaps = nil
	l.repair = &repair{r: r, seen: map[string]bool{}, since: now}
	return r, true
}

// Request reports whether the peer's repair request may be answered at
// now (not within MinGap of the one before); if not, it is deferred, and
// requests deferred with the same bucket count merge.
func (l *Link) Request(now time.Time, r peer.Repair) bool {
	if now.Sub(l.lastAsked) >= MinGap {
		l.lastAsked = now
		return true
	}
	if d := l.deferred; d != nil && d.Of == r.Of {
		for _, b := range r.Buckets {
			if !slices.Contains(d.Buckets, b) {
				d.Buckets = append(d.Buckets, b)
			}
		}
		slices.Sort(d.Buckets)
		return false
	}
	l.deferred = &r
	return false
}

// Deferred returns the deferred request, if one may be answered at now.
func (l *Link) Deferred(now time.Time) (peer.Repair, bool) {
	if l.deferred == nil || now.Sub(l.lastAsked) < MinGap {
		return peer.Repair{}, false
	}
	r := *l.deferred
	l.deferred, l.lastAsked = nil, now
	return r, true
}
