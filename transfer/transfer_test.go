package transfer_test

import (
	"slices"
	"testing"

	"github.com/solipsism/mesh/transfer"
)

// One request per object is in flight; the next goes when it is
// answered, and an asker asking twice is queued once.
func TestRequestsOneInFlight(t *testing.T) {
	var r transfer.Requests[string]
	same := func(a string) func(string) bool { return func(b string) bool { return a == b } }
	if !r.Add("o", "alice", same("alice")) {
		t.Fatal("the first request is not to be sent")
	}
	if got, ok := r.Send("o"); !ok || got != "alice" {
		t.Fatalf("Send = %q, %v", got, ok)
	}
	if r.Add("o", "bob", same("bob")) || r.Add("o", "bob", same("bob")) {
		t.Fatal("a second request went while one is in flight")
	}
	if got, ok := r.Answered("o"); !ok || got != "alice" {
		t.Fatalf("Answered = %q, %v", got, ok)
	}
	if _, ok := r.Answered("o"); ok {
		t.Fatal("answered twice: no request was in flight")
	}
	if got, ok := r.Send("o"); !ok || got != "bob" {
		t.Fatalf("next Send = %q, %v (bob was queued once)", got, ok)
	}
	r.Answered("o")
	if _, ok := r.Send("o"); ok || r.Len() != 0 {
		t.Fatal("an object with no asker left is not forgotten")
	}
}

func TestRequestsLostAndGone(t *testing.T) {
	var r transfer.Requests[int]
	never := func(int) bool { return false }
	for i, id := range []string{"a", "b", "c"} {
		r.Add(id, i, never)
	}
	r.Send("a")
	r.Send("b")
	if w := r.Waiting(); !slices.Equal(w, []string{"c"}) {
		t.Fatalf("Waiting = %v", w)
	}
	r.Lost()
	w := r.Waiting()
	slices.Sort(w)
	if !slices.Equal(w, []string{"a", "b", "c"}) {
		t.Fatalf("after Lost, Waiting = %v", w)
	}
	r.Add("b", 7, never)
	if got := r.Gone("b"); !slices.Equal(got, []int{1, 7}) {
		t.Fatalf("Gone = %v", got)
	}
	r.Edit(func(a *int) { *a *= 10 })
	all := r.Clear()
	if len(all) != 2 || all["a"][0] != 0 || all["c"][0] != 20 || r.Len() != 0 {
		t.Fatalf("Clear = %v, Len %d", all, r.Len())
	}
}

// A held answer goes when the last member acknowledges, when a claim beats
// the grant, or when its asker and members leave.
func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(h *transfer.Holds[string]) (released []string, ok bool)
		want []string
	}{
		{"all acknowledge", func(h *transfer.Holds[string]) ([]string, bool) {
			if _, ok := h.Ack("o", "m1", 3); ok {
				return nil, true // too early
			}
			h.Ack("o", "m1", 2) // an older state: not an acknowledgement
			return h.Ack("o", "m2", 3)
		}, []string{"asker"}},
		{"an old answer is no acknowledgement", func(h *transfer.Holds[string]) ([]string, bool) {
			h.Ack("o", "m1", 2)
			return h.Ack("o", "m2", 2)
		}, nil},
		{"beaten", func(h *transfer.Holds[string]) ([]string, bool) {
			if h.Beaten("o", "w", 3, false) {
				return nil, true // the grant itself is no beating
			}
			if !h.Beaten("o", "x", 4, false) {
				return nil, false
			}
			return h.Release("o"), true
		}, []string{"asker"}},
		{"members leave", func(h *transfer.Holds[string]) ([]string, bool) {
			h.Forget("m1")
			done := h.Forget("m2")
			if !slices.Equal(done, []string{"o"}) {
				return nil, false
			}
			return h.Release("o"), true
		}, []string{"asker"}},
		{"the asker leaves", func(h *transfer.Holds[string]) ([]string, bool) {
			h.Forget("asker")
			h.Ack("o", "m1", 3)
			return h.Ack("o", "m2", 3)
		}, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h transfer.Holds[string]
			h.Hold("o", "asker", "w", 3, []string{"m1", "m2"})
			if n, ok := h.Holding("o", 3); !ok || n != 2 {
				t.Fatalf("Holding = %d, %v", n, ok)
			}
			got, ok := tc.run(&h)
			if tc.want == nil {
				if ok || h.Len() != 1 {
					t.Fatalf("released %v (%v); want it held", got, ok)
				}
				return
			}
			if !ok || !slices.Equal(got, tc.want) || h.Len() != 0 {
				t.Fatalf("released %v (%v), %d held; want %v", got, ok, h.Len(), tc.want)
			}
		})
	}
}
