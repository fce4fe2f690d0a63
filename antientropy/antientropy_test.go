package antientropy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/solipsism/mesh/antientropy"
	"github.com/solipsism/mesh/peer"
)

func TestBuckets(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 1}, {16, 1}, {17, 2}, {100, 8}, {16 * 1024, 1024}, {1 << 30, 1024},
	} {
		if got := antientropy.Buckets(tc.n); got != tc.want {
			t.Errorf("Buckets(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// A bucket is repaired only when it differs in two digests in a row of the
// same size: changes crossing in flight differ once.
func TestCompareTwiceInARow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		digests [][2][]uint64 // mine, theirs
		want    []int         // of the last comparison
	}{
		{"same", [][2][]uint64{{{1, 2}, {1, 2}}, {{1, 2}, {1, 2}}}, nil},
		{"once", [][2][]uint64{{{1, 2}, {1, 3}}}, nil},
		{"twice", [][2][]uint64{{{1, 2}, {1, 3}}, {{1, 2}, {1, 4}}}, []int{1}},
		{"crossed in flight", [][2][]uint64{{{1, 2}, {1, 3}}, {{1, 2}, {1, 2}}, {{5, 2}, {1, 2}}}, nil},
		{"other bucket", [][2][]uint64{{{1, 2}, {9, 2}}, {{1, 2}, {1, 3}}}, nil},
		{"size changed", [][2][]uint64{{{1}, {2}}, {{1, 2}, {2, 2}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l antientropy.Link
			var got []int
			for _, d := range tc.digests {
				got = l.Compare(d[0], d[1])
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Compare = %v, want %v", got, tc.want)
			}
		})
	}
}

// A request that follows another within two intervals counts the one before
// as failed, and each failure spaces the next by an interval more.
func TestAskBacksOff(t *testing.T) {
	const every = time.Second
	var l antientropy.Link
	at := time.Unix(1000, 0)
	steps := []struct {
		after time.Duration
		ok    bool
	}{
		{0, true},              // first: failed 0
		{every, true},          // within 2 intervals: failed 1
		{every / 2, false},     // within failed×interval
		{every / 2, true},      // failed 2
		{3 * every / 2, false}, // < 2 s
		{every, true},          // 2.5 s after: failed stays 2 (not within 2 intervals)
	}
	for i, s := range steps {
		at = at.Add(s.after)
		r, ok := l.Ask(at, every, 8, []int{3})
		if ok != s.ok {
			t.Fatalf("step %d: Ask = %v, want %v", i, ok, s.ok)
		}
		if ok && (r.Of != 8 || !slices.Equal(r.Buckets, []int{3})) {
			t.Fatalf("step %d: request %+v", i, r)
		}
	}
}

// Only the records between the peer's "repairing" for the request asked and
// its "repaired" are the answer.
func TestAnswerFramesTheRepair(t *testing.T) {
	var l antientropy.Link
	now := time.Unix(1000, 0)
	r, _ := l.Ask(now, time.Second, 4, []int{1, 2})
	if !l.Repairing(now) || !l.Pending() {
		t.Fatal("a repair asked for is not in flight")
	}
	if _, ok := l.Answer(); ok {
		t.Fatal("answering before the peer's repairing")
	}
	l.Begin(peer.Repair{Of: 4, Buckets: []int{1}}) // not ours
	if _, ok := l.Answer(); ok {
		t.Fatal("another request's repairing began our answer")
	}
	l.Begin(r)
	if got, ok := l.Answer(); !ok || got.Of != 4 {
		t.Fatalf("Answer = %+v, %v", got, ok)
	}
	l.Saw("a")
	asked, seen, ok := l.End()
	if !ok || asked.Of != 4 || !seen("a") || seen("b") {
		t.Fatalf("End = %+v, %v, seen a %v", asked, ok, seen != nil && seen("a"))
	}
	if l.Pending() {
		t.Fatal("still pending after repaired")
	}
	if _, _, ok := l.End(); ok {
		t.Fatal("a second repaired ended something")
	}
}

func TestRepairTimesOut(t *testing.T) {
	var l antientropy.Link
	now := time.Unix(1000, 0)
	l.Ask(now, time.Second, 4, []int{1})
	if !l.Repairing(now.Add(antientropy.RepairTimeout)) {
		t.Fatal("forgot the repair before its timeout")
	}
	if l.Repairing(now.Add(antientropy.RepairTimeout + time.Millisecond)) {
		t.Fatal("kept the repair past its timeout")
	}
}

func TestGapsWaitForTheRepair(t *testing.T) {
	var l antientropy.Link
	now := time.Unix(1000, 0)
	if _, ok := l.GapRequest(now); ok {
		t.Fatal("a request with no gap")
	}
	l.Ask(now, time.Second, 4, []int{1})
	l.Gap(5)
	l.Gap(antientropy.GapBuckets + 5) // the same bucket
	l.Gap(2)
	if _, ok := l.GapRequest(now); ok {
		t.Fatal("asked for gaps while a repair is in flight")
	}
	r, ok := l.GapRequest(now.Add(antientropy.RepairTimeout + time.Second))
	if !ok || r.Of != antientropy.GapBuckets || !slices.Equal(r.Buckets, []int{2, 5}) {
		t.Fatalf("GapRequest = %+v, %v", r, ok)
	}
	if _, ok := l.GapRequest(now.Add(time.Hour)); ok {
		t.Fatal("the gaps were asked for twice")
	}
}

func TestRequestsTooSoonAreDeferredAndMerged(t *testing.T) {
	var l antientropy.Link
	now := time.Unix(1000, 0)
	if !l.Request(now, peer.Repair{Of: 8, Buckets: []int{1}}) {
		t.Fatal("the first request was deferred")
	}
	if l.Request(now.Add(time.Millisecond), peer.Repair{Of: 8, Buckets: []int{4, 2}}) ||
		l.Request(now.Add(2*time.Millisecond), peer.Repair{Of: 8, Buckets: []int{2, 3}}) {
		t.Fatal("a request within MinGap was answered")
	}
	if _, ok := l.Deferred(now.Add(antientropy.MinGap / 2)); ok {
		t.Fatal("the deferred request came out within MinGap")
	}
	r, ok := l.Deferred(now.Add(antientropy.MinGap))
	if !ok || !slices.Equal(r.Buckets, []int{2, 3, 4}) {
		t.Fatalf("Deferred = %+v, %v", r, ok)
	}
	if _, ok := l.Deferred(now.Add(time.Hour)); ok {
		t.Fatal("deferred twice")
	}
}

func TestLateIsToldOnce(t *testing.T) {
	var l antientropy.Link
	l.NoteMissing([]string{"a", "b"})
	if !l.Waiting() || !l.Late("a") || l.Late("a") || l.Late("c") {
		t.Fatal("Late does not tell each missing id once")
	}
	ids := make([]string, antientropy.MaxMissing+10)
	for i := range ids {
		ids[i] = string(rune('A' + i))
	}
	l.NoteMissing(ids)
	if !l.Late(ids[0]) || l.Late(ids[len(ids)-1]) {
		t.Fatal("NoteMissing is not bounded by MaxMissing")
	}
}

func TestScheduleSpreadsFirstDigest(t *testing.T) {
	var l antientropy.Link
	now := time.Unix(1000, 0)
	if !l.Due(now) || !l.Spread(now, time.Minute) {
		t.Fatal("a new link is not spread")
	}
	if l.Spread(now, time.Minute) {
		t.Fatal("spread twice")
	}
	if l.Due(now) || !l.Due(now.Add(time.Minute+time.Nanosecond)) {
		t.Fatal("the first digest is not within an interval")
	}
	l.Sent(now, time.Minute)
	l.Postpone(now)
	if l.Due(now) || !l.Due(now.Add(antientropy.Postpone)) {
		t.Fatal("Postpone")
	}
	l.MakeDue(now)
	if !l.Due(now) {
		t.Fatal("MakeDue")
	}
}

func TestCounts(t *testing.T) {
	var c antientropy.Counts
	if !c.Add(antientropy.Missing, 2) || c.Add(antientropy.Missing, 3) || !c.Add(antientropy.Extra, 1) {
		t.Fatal("Add does not tell the first of each kind")
	}
	got := c.Map()
	if got[antientropy.Missing] != 5 || got[antientropy.Stale] != 0 || got[antientropy.Extra] != 1 {
		t.Fatalf("Map = %v", got)
	}
}
