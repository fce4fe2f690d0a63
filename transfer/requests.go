package transfer

import "slices"

// Requests are the transfer requests a node passes on toward the node
// that decides them, by object: each object's askers in order, the first
// one's request in flight once sent. Only one request per object is in
// flight, so that each answer belongs to exactly one request, whatever the
// links coalesce; the others wait their turn. A is an asker. The zero
// value is empty.
type Requests[A any] struct {
	m map[string]*queue[A]
}

type queue[A any] struct {
	askers []A
	sent   bool
}

// Len reports how many objects have requests.
func (r *Requests[A]) Len() int { return len(r.m) }

// Add queues a's request for id, unless same reports that an asker queued
// already is a's equal (one answer tells both). It reports whether id's
// first request is to be sent now: none is in flight.
func (r *Requests[A]) Add(id string, a A, same func(A) bool) (send bool) {
	if r.m == nil {
		r.m = map[string]*queue[A]{}
	}
	q := r.m[id]
	if q == nil {
		q = &queue[A]{}
		r.m[id] = q
	}
	if slices.ContainsFunc(q.askers, same) {
		return false
	}
	q.askers = append(q.askers, a)
	return !q.sent
}

// Send returns the request of id to send now, marked in flight, or false
// (and forgets id) when none waits.
func (r *Requests[A]) Send(id string) (A, bool) {
	q := r.m[id]
	if q == nil || len(q.askers) == 0 {
		delete(r.m, id)
		var zero A
		return zero, false
	}
	q.sent = true
	return q.askers[0], true
}

// Unsent marks id's request as not in flight: it goes again at the next
// Send.
func (r *Requests[A]) Unsent(id string) {
	if q := r.m[id]; q != nil {
		q.sent = false
	}
}

// Answered takes the request of id in flight off its queue and returns
// its asker, or false when none was in flight (an answer to a request sent
// on an earlier link, or to none). Send the next one then.
func (r *Requests[A]) Answered(id string) (A, bool) {
	q := r.m[id]
	if q == nil || !q.sent || len(q.askers) == 0 {
		var zero A
		return zero, false
	}
	a := q.askers[0]
	q.askers = q.askers[1:]
	q.sent = false
	return a, true
}

// Gone forgets id and returns its askers: the object went away.
func (r *Requests[A]) Gone(id string) []A {
	q := r.m[id]
	if q == nil {
		return nil
	}
	delete(r.m, id)
	return q.askers
}

// Lost marks every request in flight as not sent: the link they went on
// closed, and they go again on the next.
func (r *Requests[A]) Lost() {
	for _, q := range r.m {
		q.sent = false
	}
}

// Waiting returns the objects whose requests are not in flight.
func (r *Requests[A]) Waiting() []string {
	var ids []string
	for id, q := range r.m {
		if !q.sent {
			ids = append(ids, id)
		}
	}
	return ids
}

// Clear forgets every request and returns the askers, by object.
func (r *Requests[A]) Clear() map[string][]A {
	out := make(map[string][]A, len(r.m))
	for id, q := range r.m {
		out[id] = q.askers
	}
	clear(r.m)
	return out
}

// Edit calls fn with every asker queued, to change it in place (forget a
// link that closed, say).
func (r *Requests[A]) Edit(fn func(*A)) {
	for _, q := range r.m {
		for i := range q.askers {
			fn(&q.askers[i])
		}
	}
}
