package transfer

import "slices"

// Holds are the answers a mesh server holds, by object, until every
// member it is linked to has acknowledged its grant (answered with a state
// of at least the grant's epoch), or a claim has beaten the grant here.
// Members pass on only their own grants and each answers after what it
// routed before, so by then the server has heard every concurrent claim,
// and its answer is the outcome the whole mesh agrees on. L is a link (an
// asker, a member). The zero value is empty.
type Holds[L comparable] struct {
	m map[string]*hold[L]
}

type hold[L comparable] struct {
	askers  []L
	owner   string
	epoch   uint64
	waiting map[L]bool
}

// Len reports how many objects have answers held.
func (h *Holds[L]) Len() int { return len(h.m) }

// Hold holds asker's answer about id, granted to owner at epoch, until
// every member of waiting (not empty) acknowledges the grant. A later
// grant of the same object replaces what is waited for and keeps the
// askers.
func (h *Holds[L]) Hold(id string, asker L, owner string, epoch uint64, waiting []L) {
	if h.m == nil {
		h.m = map[string]*hold[L]{}
	}
	x := h.m[id]
	if x == nil {
		x = &hold[L]{}
		h.m[id] = x
	}
	if !slices.Contains(x.askers, asker) {
		x.askers = append(x.askers, asker)
	}
	x.owner, x.epoch, x.waiting = owner, epoch, make(map[L]bool, len(waiting))
	for _, m := range waiting {
		x.waiting[m] = true
	}
}

// Ack takes member m's answer about id, at epoch, as its acknowledgement:
// when it was the last one waited for, the hold ends and its askers are
// returned.
func (h *Holds[L]) Ack(id string, m L, epoch uint64) (askers []L, released bool) {
	x := h.m[id]
	if x == nil || epoch < x.epoch || !x.waiting[m] {
		return nil, false // not yet seen by the member: its next answer will be
	}
	delete(x.waiting, m)
	if len(x.waiting) > 0 {
		return nil, false
	}
	return h.Release(id), true
}

// Beaten reports whether a change of id (to owner at epoch, or its
// removal) beats the grant held: of two claims the same one wins
// everywhere, so the asker's answer is known without waiting.
func (h *Holds[L]) Beaten(id, owner string, epoch uint64, removed bool) bool {
	x := h.m[id]
	return x != nil && (removed || owner != x.owner || epoch != x.epoch)
}

// Holding reports whether the answer about id is held for its grant at
// epoch, and how many members it waits for.
func (h *Holds[L]) Holding(id string, epoch uint64) (waiting int, ok bool) {
	x := h.m[id]
	if x == nil || x.epoch != epoch {
		return 0, false
	}
	return len(x.waiting), true
}

// Release ends the hold of id and returns its askers.
func (h *Holds[L]) Release(id string) []L {
	x := h.m[id]
	delete(h.m, id)
	if x == nil {
		return nil
	}
	return x.askers
}

// Forget drops l, a link that closed, from the holds: as an asker (its
// place becomes the zero L) and as a member waited for. It returns the
// objects whose holds that ends, to Release.
func (h *Holds[L]) Forget(l L) (done []string) {
	var zero L
	for id, x := range h.m {
		for i, a := range x.askers {
			if a == l {
				x.askers[i] = zero
			}
		}
		if x.waiting[l] {
			delete(x.waiting, l)
			if len(x.waiting) == 0 {
				done = append(done, id)
			}
		}
	}
	return done
}
