package relay

import (
	"slices"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

// nearby lets a link on the schedule skip, unseen, the far updates of a
// flush's log. Such a link takes of the log only what cannot wait: entries
// that are not updates of a placed object, its own, those within
// Priority.Near of its region's centres, and those its region would hide;
// every other placed update waits for the schedule (waitsForSchedule).
// When every placed update of the log lies inside one of its boxes, none
// is hidden, and what is near is found by column: a crowd's link then
// looks at a few dozen entries of the log rather than at every one.
// Built once a flush, under n.mu; read by the offers on every core.
type nearby struct {
	cols interest.Columns
	// others lists the entries that are not placed updates; placed marks
	// those that are; own lists them by the link whose peer made them.
	others []int
	placed []bool
	own    map[*linkState][]int
	// lo and hi bound the placed updates' positions, if any (some).
	lo, hi [3]float64
	some   bool
	// built is set from build to the end of the flush.
	built bool
}

// build groups the log's entries for this flush.
func (nb *nearby) build(log []logEntry, near float64) {
	nb.cols.Reset(near)
	nb.built = true
	nb.others, nb.placed, nb.some = nb.others[:0], slices.Grow(nb.placed[:0], len(log))[:len(log)], false
	for k, v := range nb.own {
		if len(v) == 0 {
			delete(nb.own, k)
		} else {
			nb.own[k] = v[:0]
		}
	}
	for i := range log {
		e := &log[i]
		if e.rec.Type != gameworld.Update || !e.spot.HasP {
			nb.others, nb.placed[i] = append(nb.others, i), false
			continue
		}
		nb.placed[i] = true
		p := e.spot.P
		if !nb.some {
			nb.lo, nb.hi, nb.some = p, p, true
		}
		for k := range 3 {
			nb.lo[k], nb.hi[k] = min(nb.lo[k], p[k]), max(nb.hi[k], p[k])
		}
		if e.from != nil {
			if nb.own == nil {
				nb.own = make(map[*linkState][]int)
			}
			nb.own[e.from] = append(nb.own[e.from], i)
		}
		nb.cols.Add(p, i)
	}
}

// subOf returns, in log order, what ls (on the schedule, its region's
// entries of the log sub) takes of the log, or false if it must look at
// every entry of sub: its region has rooms, or a placed update lies
// outside all of its boxes (which it would be sent as a hide). It reads
// ls's region and nb only: the offers call it on every core.
func (nb *nearby) subOf(ls *linkState, sub []int) ([]int, bool) {
	r := ls.region
	if !nb.built || r.Rooms != nil || !r.HasBoxes {
		return nil, false
	}
	if nb.some && !slices.ContainsFunc(r.Boxes, func(b peer.Box) bool { return b.Contains(nb.lo, 0) && b.Contains(nb.hi, 0) }) {
		return nil, false
	}
	near := r.nearBuf[:0]
	for _, b := range r.Boxes {
		nb.cols.Around(interest.Centre(b), func(i int) { near = append(near, i) })
	}
	near = append(near, nb.own[ls]...)
	slices.Sort(near)
	near = slices.Compact(near)
	out := r.nearSub[:0]
	if r.Wide() {
		// sub is the whole log: what is not a placed update, and the
		// near ones, merged.
		k := 0
		for _, i := range nb.others {
			for ; k < len(near) && near[k] < i; k++ {
				out = append(out, near[k])
			}
			out = append(out, i)
		}
		out = append(out, near[k:]...)
	} else {
		k := 0
		for _, i := range sub {
			for k < len(near) && near[k] < i {
				k++
			}
			if !nb.placed[i] || (k < len(near) && near[k] == i) {
				out = append(out, i)
			}
		}
	}
	r.nearBuf, r.nearSub = near, out
	return out, true
}
