package scope

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// sameScopes reports whether two scopes hold the same elements, and checks
// that their sums and sizes agree with what they hold.
func sameScopes(t *testing.T, what string, a, b *Scope) {
	t.Helper()
	if ja, jb := string(a.AppendJSON(nil)), string(b.AppendJSON(nil)); ja != jb {
		t.Fatalf("%s: %s\nwant %s", what, jb, ja)
	}
	if a.Sum() != b.Sum() || a.Size() != b.Size() {
		t.Fatalf("%s: sums %x %x, sizes %d %d", what, a.Sum(), b.Sum(), a.Size(), b.Size())
	}
}

// A node's copy (Apply) follows the owner's deltas, and a queue that
// composes runs of them gives a replica the same end.
func TestApplyAndComposeFollowTheOwner(t *testing.T) {
	for seed := range 30 {
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		owner, node, queued := New(), New(), New()
		r := NewReplica()
		var pending Delta
		havePending := false
		for tick := range 60 {
			for range rng.IntN(6) {
				id := fmt.Sprint(rng.IntN(12))
				switch rng.IntN(4) {
				case 0:
					owner.Remove(id)
				default:
					owner.Set(id, f("c", rng.IntN(3), fmt.Sprint("k", rng.IntN(2)), rng.IntN(2)))
				}
			}
			d := owner.Tick()
			if d.Empty() {
				continue
			}
			// Through the wire's JSON, as a node takes it.
			b, _ := json.Marshal(d)
			d, err := Limits{}.DecodeDelta(b)
			if err != nil {
				t.Fatal(err)
			}
			out, err := node.Apply(d)
			if err != nil {
				t.Fatalf("seed %d tick %d: %v", seed, tick, err)
			}
			sameScopes(t, fmt.Sprintf("seed %d tick %d node", seed, tick), owner, node)
			if out.Ver != d.Ver {
				t.Fatalf("out ver %d, want %d", out.Ver, d.Ver)
			}
			if _, err := queued.Apply(out); err != nil {
				t.Fatalf("node's delta: %v", err)
			}
			sameScopes(t, "what the node told", owner, queued)
			if havePending {
				pending = Compose(pending, out)
			} else {
				pending, havePending = out, true
			}
			if rng.IntN(3) == 0 {
				if err := r.Apply(pending, nil); err != nil {
					t.Fatalf("seed %d tick %d: composed %+v: %v", seed, tick, pending, err)
				}
				havePending = false
			}
		}
		if havePending {
			if err := r.Apply(pending, nil); err != nil {
				t.Fatal(err)
			}
		}
		same(t, owner, r)
	}
}

func TestApplyRules(t *testing.T) {
	s := New()
	if _, err := s.Apply(Delta{Ver: 2, Base: 1, Added: map[string]Fields{"a": f("c", 1)}}); !errors.Is(err, ErrGap) {
		t.Fatalf("gap: %v", err)
	}
	out, err := s.Apply(Delta{Added: map[string]Fields{"a": f("c", 1)}})
	if err != nil || out.Ver != 1 || out.Base != 0 || s.Ver() != 1 {
		t.Fatalf("numbered by the scope: %+v %v", out, err)
	}
	if _, err := s.Apply(Delta{Ver: 1, Base: 0, Modified: map[string]Fields{"a": f("c", 2)}}); !errors.Is(err, ErrStale) {
		t.Fatalf("stale: %v", err)
	}
	out, _ = s.Apply(Delta{Modified: map[string]Fields{"a": f("c", 1)}})
	if !out.Empty() || out.Ver != 1 || s.Ver() != 1 {
		t.Fatalf("a change to the same value, numbered here: %+v, ver %d", out, s.Ver())
	}
	// The owner's delta that changes nothing here still moves the version
	// on, and says so: its next delta is built on it.
	out, _ = s.Apply(Delta{Ver: 2, Base: 1, Modified: map[string]Fields{"a": f("c", 1)}})
	if !out.Empty() || out.Ver != 2 || out.Base != 1 || s.Ver() != 2 {
		t.Fatalf("an owner's change to the same value: %+v, ver %d", out, s.Ver())
	}
	out, _ = s.Apply(Delta{Ver: 3, Base: 2, Added: map[string]Fields{"a": f("d", 1)}})
	if b, _ := json.Marshal(out); string(b) != `{"ver":3,"added":{"a":{"d":1}},"removed":["a"]}` {
		t.Fatalf("an addition of an existing element replaces it: %s", b)
	}
	out, _ = s.Apply(Delta{Ver: 4, Full: true, Added: map[string]Fields{"a": f("d", 1), "b": f("c", 5)}})
	if b, _ := json.Marshal(out); string(b) != `{"ver":4,"added":{"b":{"c":5}}}` {
		t.Fatalf("a newer snapshot gives what changed: %s", b)
	}
	out, _ = s.Apply(Delta{Ver: 5, Full: true, Added: map[string]Fields{"b": f("c", 6)}})
	if b, _ := json.Marshal(out); string(b) != `{"ver":5,"added":{"b":{"c":6}},"removed":["a","b"]}` {
		t.Fatalf("a newer snapshot gives what changed: %s", b)
	}
	// A snapshot of a lower version (an owner that restarted) replaces all.
	out, err = s.Apply(Delta{Ver: 1, Full: true, Added: map[string]Fields{"b": f("c", 5)}})
	if b, _ := json.Marshal(out); err != nil || string(b) != `{"ver":1,"added":{"b":{"c":5}},"full":true}` || s.Len() != 1 {
		t.Fatalf("snapshot: %s %v", b, err)
	}
	if _, err := s.Apply(Delta{Modified: map[string]Fields{"b": {"c": json.RawMessage("{")}}}); !errors.Is(err, ErrBadField) {
		t.Fatalf("bad field: %v", err)
	}
}

func TestCompose(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want string
	}{
		{"modify after add", `{"ver":2,"added":{"x":{"c":1,"t":1}}}`, `{"ver":3,"modified":{"x":{"c":2}}}`,
			`{"ver":3,"base":1,"added":{"x":{"c":2,"t":1}}}`},
		{"remove after add", `{"ver":2,"added":{"x":{"c":1}}}`, `{"ver":3,"removed":["x"]}`,
			`{"ver":3,"base":1,"removed":["x"]}`},
		{"add after remove", `{"ver":2,"removed":["x"]}`, `{"ver":3,"added":{"x":{"c":1}}}`,
			`{"ver":3,"base":1,"added":{"x":{"c":1}},"removed":["x"]}`},
		{"modifications merge", `{"ver":2,"modified":{"x":{"c":1}}}`, `{"ver":3,"modified":{"x":{"t":1}}}`,
			`{"ver":3,"base":1,"modified":{"x":{"c":1,"t":1}}}`},
		{"into a snapshot", `{"ver":2,"added":{"x":{"c":1},"y":{"c":1}},"full":true}`, `{"ver":3,"modified":{"x":{"c":2}},"removed":["y"]}`,
			`{"ver":3,"added":{"x":{"c":2}},"full":true}`},
		{"already in a snapshot", `{"ver":3,"added":{"x":{"c":2}},"full":true}`, `{"ver":3,"modified":{"x":{"c":2}}}`,
			`{"ver":3,"added":{"x":{"c":2}},"full":true}`},
		{"a snapshot replaces", `{"ver":2,"modified":{"x":{"c":1}}}`, `{"ver":3,"added":{"y":{}},"full":true}`,
			`{"ver":3,"added":{"y":{}},"full":true}`},
	} {
		a, err := Limits{}.DecodeDelta([]byte(tc.a))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Limits{}.DecodeDelta([]byte(tc.b))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(Compose(a, b))
		if string(got) != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestFromJSON(t *testing.T) {
	s := New()
	s.Set(`a"b`, f("c", 1))
	s.Set("0,0,1", f("t", "stone"))
	s.Tick()
	b := s.AppendJSON(nil)
	if string(b) != `{"0,0,1":{"t":"stone"},"a\"b":{"c":1}}` {
		t.Fatalf("%s", b)
	}
	d, err := FromJSON(b, 7)
	if err != nil {
		t.Fatal(err)
	}
	n := New()
	if _, err := n.Apply(d); err != nil {
		t.Fatal(err)
	}
	sameScopes(t, "from JSON", s, n)
	if _, err := FromJSON([]byte(`[1]`), 1); err == nil {
		t.Fatal("an array taken")
	}
}

// A queue composes an element's addition and removal into a delta that
// changes nothing at the next copy: that copy still follows the version,
// and so do the copies after it, so the owner's next delta is no gap.
func TestComposedNothingKeepsVersions(t *testing.T) {
	owner, node, next := New(), New(), New()
	owner.Set("a", f("c", 1))
	first := owner.Tick()
	for _, s := range []*Scope{node, next} {
		if _, err := s.Apply(first); err != nil {
			t.Fatal(err)
		}
	}
	owner.Set("x", f("c", 2))
	added := owner.Tick()
	owner.Remove("x")
	queued := Compose(added, owner.Tick())
	out, err := node.Apply(queued)
	if err != nil || node.Ver() != owner.Ver() || out.Ver != owner.Ver() {
		t.Fatalf("the composed delta: %+v, %v; the node at %d, the owner at %d", out, err, node.Ver(), owner.Ver())
	}
	if _, err := next.Apply(out); err != nil || next.Ver() != owner.Ver() {
		t.Fatalf("the copy after: %v, at %d", err, next.Ver())
	}
	owner.Set("a", f("c", 3))
	d := owner.Tick()
	for _, s := range []*Scope{node, next} {
		if _, err := s.Apply(d); err != nil {
			t.Fatalf("the owner's next delta: %v", err)
		}
		sameScopes(t, "after", owner, s)
	}
}
