package main

import "sync"

// keptChanges is how many of an object's latest changes changeLog keeps:
// at 5 Hz, 12.8 s of them, far more than a far object waits.
const keptChanges = 64

// changeLog keeps the "t" of the latest changes of each object the tool's
// clients write, so that an observer that is sent a far object's new
// value can tell when the value it showed until then was superseded: how
// long it showed a value its owner had already changed (the far objects'
// "behind"), beside how old that value was (their staleness, which also
// counts the time the value was still current). It is safe for
// concurrent use.
type changeLog struct {
	mu   sync.Mutex
	objs map[string]*changeRing
}

type changeRing struct {
	ts [keptChanges]int64
	n  int // changes noted in all
}

// note records a change of obj made at t (its "t" property), before it is
// sent: an observer is never sent a value the log does not hold.
func (l *changeLog) note(obj string, t int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.objs == nil {
		l.objs = map[string]*changeRing{}
	}
	r := l.objs[obj]
	if r == nil {
		r = &changeRing{}
		l.objs[obj] = r
	}
	r.ts[r.n%keptChanges] = t
	r.n++
}

// supersededAt returns the "t" of obj's first change after the one made
// at prev, and false if the log cannot tell (an object of another
// process, or prev older than every change it keeps).
func (l *changeLog) supersededAt(obj string, prev int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.objs[obj]
	if r == nil {
		return 0, false
	}
	first := max(0, r.n-keptChanges)
	for i := first; i < r.n; i++ {
		if t := r.ts[i%keptChanges]; t > prev {
			// Known only if the log holds the change before it too
			// (prev's, or one after it): else changes may have been lost.
			return t, i > first
		}
	}
	return 0, false
}
