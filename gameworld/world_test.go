package gameworld

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func props(kv ...string) Properties {
	p := PropertiesOf(map[string]json.RawMessage{})
	for i := 0; i+1 < len(kv); i += 2 {
		p = p.With(kv[i], json.RawMessage(kv[i+1]))
	}
	return p
}

func add(id, owner string, kv ...string) Change {
	return Change{Type: Add, ID: id, Owner: owner, Properties: props(kv...)}
}
func upd(id string, kv ...string) Change {
	return Change{Type: Update, ID: id, Properties: props(kv...)}
}
func rem(id string) Change { return Change{Type: Remove, ID: id} }

func summary(recs []Record) string {
	s := ""
	for _, r := range recs {
		s += fmt.Sprintf("%s:%s:%s:%v;", r.Type, r.ID, r.Owner, propString(r.Properties))
	}
	return s
}

func propString(p Properties) string {
	if p.IsZero() {
		return "-"
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		before  []Change
		batch   []Change
		want    string // records
		refused int
		objects string // id:owner:props of every object after
	}{
		{"add", nil, []Change{add("a", "w1", "x", "1")}, `add:a:w1:{"x":1};`, 0, `a:w1:{"x":1};`},
		{"add existing is update, owner kept", []Change{add("a", "w1", "x", "1")},
			[]Change{add("a", "w2", "y", "2")}, `update:a:w1:{"y":2};`, 0, `a:w1:{"x":1,"y":2};`},
		{"partial update", []Change{add("a", "w1", "x", "1", "y", "2")},
			[]Change{upd("a", "y", "3")}, `update:a:w1:{"y":3};`, 0, `a:w1:{"x":1,"y":3};`},
		{"update that changes nothing", []Change{add("a", "w1", "x", "1")},
			[]Change{upd("a", "x", "1")}, ``, 0, `a:w1:{"x":1};`},
		{"update unknown ignored", nil, []Change{upd("zz", "x", "1")}, ``, 1, ``},
		{"remove unknown ignored", nil, []Change{rem("zz")}, ``, 1, ``},
		{"remove", []Change{add("a", "w1", "x", "1")}, []Change{rem("a")}, `remove:a:w1:-;`, 0, ``},
		{"add then remove cancels", nil, []Change{add("a", "w1"), upd("a", "x", "2"), rem("a")}, ``, 0, ``},
		{"add then update coalesces", nil, []Change{add("a", "w1", "x", "1"), upd("a", "y", "2")},
			`add:a:w1:{"x":1,"y":2};`, 0, `a:w1:{"x":1,"y":2};`},
		{"update then update merges", []Change{add("a", "w1", "x", "1")},
			[]Change{upd("a", "x", "2"), upd("a", "y", "3")}, `update:a:w1:{"x":2,"y":3};`, 0, `a:w1:{"x":2,"y":3};`},
		{"update then remove is remove", []Change{add("a", "w1", "x", "1")},
			[]Change{upd("a", "x", "2"), rem("a")}, `remove:a:w1:-;`, 0, ``},
		{"remove then add keeps both", []Change{add("a", "w1", "x", "1")},
			[]Change{rem("a"), add("a", "w2", "y", "2")}, `remove:a:w1:-;add:a:w2:{"y":2};`, 0, `a:w2:{"y":2};`},
		{"remove then update of removed ignored", []Change{add("a", "w1")},
			[]Change{rem("a"), upd("a", "x", "1")}, `remove:a:w1:-;`, 1, ``},
		{"two objects keep order", nil, []Change{add("b", "w1"), add("a", "w1")},
			`add:b:w1:{};add:a:w1:{};`, 0, `a:w1:{};b:w1:{};`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New("server-AAAAAAAA-BBBBBBBB")
			w.Apply(tt.before, nil)
			res := w.Apply(tt.batch, nil)
			if got := summary(res.Records); got != tt.want {
				t.Errorf("records = %s\nwant      %s", got, tt.want)
			}
			if len(res.Refused) != tt.refused {
				t.Errorf("refused = %d, want %d", len(res.Refused), tt.refused)
			}
			for _, r := range res.Refused {
				if !errors.Is(r.Err, ErrUnknownObject) {
					t.Errorf("refusal error = %v", r.Err)
				}
			}
			got := ""
			for _, o := range w.Objects() {
				got += fmt.Sprintf("%s:%s:%s;", o.ID, o.Owner, propString(o.Properties))
			}
			if got != tt.objects {
				t.Errorf("objects = %s\nwant      %s", got, tt.objects)
			}
		})
	}
}

func TestApplyAuthorizerSeesEarlierChangesOfBatch(t *testing.T) {
	w := New("w")
	var seen []string
	auth := func(c Change, existing *Object) error {
		if existing != nil {
			seen = append(seen, c.ID+"@"+existing.Owner)
		}
		if c.Owner == "forger" {
			return errors.New("no")
		}
		return nil
	}
	res := w.Apply([]Change{add("a", "me"), upd("a", "x", "1"), add("b", "forger")}, auth)
	if len(seen) != 1 || seen[0] != "a@me" {
		t.Fatalf("authorizer saw %v", seen)
	}
	if len(res.Refused) != 1 || res.Refused[0].Change.ID != "b" {
		t.Fatalf("refused = %+v", res.Refused)
	}
	if _, ok := w.Get("b"); ok {
		t.Fatal("refused add was applied")
	}
}

func TestVersionsAndRevisions(t *testing.T) {
	w := New("w")
	w.Apply([]Change{add("a", "me", "x", "1")}, nil)
	w.Apply([]Change{upd("a", "x", "2")}, nil)
	res := w.Apply([]Change{add("b", "me")}, nil)
	a, _ := w.Get("a")
	if a.Version != 2 {
		t.Fatalf("a version = %d", a.Version)
	}
	if w.Revision() != 3 || res.Records[0].Revision != 3 {
		t.Fatalf("world revision = %d", w.Revision())
	}
}

func TestSubscribeOrder(t *testing.T) {
	w := New("w")
	var mu sync.Mutex
	var revs []uint64
	cancel := w.Subscribe(func(a Applied) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range a.Records {
			revs = append(revs, r.Revision)
		}
		_ = w.Len() // reading inside a callback must not deadlock
	})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				w.Apply([]Change{add(fmt.Sprintf("%d-%d", i, j), "me")}, nil)
			}
		}(i)
	}
	wg.Wait()
	cancel()
	w.Apply([]Change{add("late", "me")}, nil)
	if len(revs) != 800 {
		t.Fatalf("got %d records", len(revs))
	}
	for i, r := range revs {
		if r != uint64(i+1) {
			t.Fatalf("record %d has revision %d: out of order", i, r)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewIdentifier("client")
		if !IsIdentifier(id) || seen[id] {
			t.Fatalf("bad or repeated identifier %q", id)
		}
		seen[id] = true
	}
	for _, s := range []string{"server-abcdefgh-12345678", "web-worker-ABCDEFGH-abcdefgh", "abcdefgh-12345678"} {
		if !IsIdentifier(s) {
			t.Errorf("IsIdentifier(%q) = false", s)
		}
	}
	for _, s := range []string{"", "server", "server-abc-123", "server-abcdefg!-12345678", "-abcdefgh-12345678", "my server-abcdefgh-12345678", "a--b-abcdefgh-12345678"} {
		if IsIdentifier(s) {
			t.Errorf("IsIdentifier(%q) = true", s)
		}
	}
}

func TestRange(t *testing.T) {
	w := New("w")
	w.Apply([]Change{add("a", "me"), add("b", "me"), add("c", "you")}, nil)
	seen := map[string]string{}
	w.Range(func(o Object) bool { seen[o.ID] = o.Owner; return true })
	if len(seen) != 3 || seen["c"] != "you" {
		t.Fatalf("Range saw %v", seen)
	}
	n := 0
	w.Range(func(Object) bool { n++; return false })
	if n != 1 {
		t.Fatalf("Range went on after false: %d calls", n)
	}
}

// TestRangeFrom: a pass over the world in pieces, by slot, sees every
// object once, whatever the pieces' sizes; what is removed between two
// pieces is not seen, what is added in a slot still to come is.
func TestRangeFrom(t *testing.T) {
	for _, piece := range []int{1, 3, 10, 100} {
		t.Run(fmt.Sprint(piece), func(t *testing.T) {
			w := New("w")
			var adds []Change
			for i := range 50 {
				adds = append(adds, add(fmt.Sprintf("o%02d", i), "me"))
			}
			w.Apply(adds, nil)
			w.Apply([]Change{{Type: Remove, ID: "o10"}, {Type: Remove, ID: "o11"}}, nil) // free slots 10, 11
			seen := map[string]int{}
			var at uint32
			for round := 0; ; round++ {
				n := 0
				next, done := w.RangeFrom(at, func(o Object) bool { seen[o.ID]++; n++; return n < piece })
				if round == 0 {
					// Between pieces: o40 goes, o99 comes (in free slot 10,
					// already passed unless the first piece was short).
					w.Apply([]Change{{Type: Remove, ID: "o40"}, add("o99", "me")}, nil)
				}
				if done {
					break
				}
				if next <= at {
					t.Fatalf("no progress from slot %d", at)
				}
				at = next
			}
			for id, k := range seen {
				if k != 1 {
					t.Fatalf("%s seen %d times", id, k)
				}
			}
			if seen["o40"] != 0 && piece < 40 {
				t.Fatal("a removed object was seen")
			}
			if seen["o00"] != 1 || seen["o49"] != 1 || seen["o10"] != 0 {
				t.Fatalf("seen %v", seen)
			}
		})
	}
}

// TestSlotsReusedLowestFirst: after a flood of objects leaves, new objects
// take the lowest free slots, so per-slot state elsewhere stays small.
func TestSlotsReusedLowestFirst(t *testing.T) {
	w := New("server-11111111-11111111")
	var adds, removes []Change
	for i := range 1000 {
		id := fmt.Sprintf("o%d", i)
		adds = append(adds, Change{Type: Add, ID: id, Owner: "a"})
		if i > 0 {
			removes = append(removes, Change{Type: Remove, ID: id})
		}
	}
	w.Apply(adds, nil)
	w.Apply(removes, nil) // o0 stays, in slot 0
	res := w.Apply([]Change{{Type: Add, ID: "new1", Owner: "a"}, {Type: Add, ID: "new2", Owner: "a"}}, nil)
	if res.Records[0].Slot != 1 || res.Records[1].Slot != 2 {
		t.Fatalf("new objects took slots %d and %d, want 1 and 2", res.Records[0].Slot, res.Records[1].Slot)
	}
	w.Apply([]Change{{Type: Remove, ID: "o0"}, {Type: Remove, ID: "new1"}, {Type: Remove, ID: "new2"}}, nil)
	if res := w.Apply([]Change{{Type: Add, ID: "again", Owner: "a"}}, nil); res.Records[0].Slot != 0 {
		t.Fatalf("an empty world gave slot %d", res.Records[0].Slot)
	}
}

// TestWorldSize: Size follows adds, updates, transfers and removes.
func TestWorldSize(t *testing.T) {
	w := New("w")
	size := func() (int, int64) { return w.Size() }
	check := func(what string, wantN int, wantB int64) {
		t.Helper()
		if n, b := size(); n != wantN || b != wantB {
			t.Fatalf("%s: size %d objects, %d bytes; want %d, %d", what, n, b, wantN, wantB)
		}
	}
	w.Apply([]Change{{Type: Add, ID: "a", Owner: "o", Properties: PropertiesOf(map[string]json.RawMessage{"x": []byte("12")})}}, nil)
	check("add", 1, 3)
	w.Apply([]Change{{Type: Update, ID: "a", Properties: PropertiesOf(map[string]json.RawMessage{"x": []byte("1234"), "yy": []byte("1")})}}, nil)
	check("update", 1, 8)
	w.Apply([]Change{{Type: Add, ID: "a", Owner: "o", Properties: PropertiesOf(map[string]json.RawMessage{"x": []byte("1234")})}}, nil)
	check("add of an existing id that changes nothing", 1, 8)
	w.Apply([]Change{{Type: Transfer, ID: "a", Owner: "p", Epoch: 1, Properties: PropertiesOf(map[string]json.RawMessage{"z": []byte("1")})}}, nil)
	check("transfer with the whole object", 1, 2)
	w.Apply([]Change{{Type: Add, ID: "b", Owner: "o", Properties: PropertiesOf(map[string]json.RawMessage{"k": []byte("true")})}, {Type: Remove, ID: "a"}}, nil)
	check("add and remove", 1, 5)
	w.Apply([]Change{{Type: Remove, ID: "b"}}, nil)
	check("empty", 0, 0)
}

// TestRangeDigests: the dense digest array agrees with the objects through
// adds, updates, transfers and removes, and every digest is
// ObjectDigest of what the object is.
func TestRangeDigests(t *testing.T) {
	w := New("w")
	var changes []Change
	for i := range 50 {
		changes = append(changes, Change{Type: Add, ID: fmt.Sprint("o", i), Owner: "a", Properties: PropertiesOf(map[string]json.RawMessage{"x": []byte(fmt.Sprint(i))})})
	}
	w.Apply(changes, nil)
	w.Apply([]Change{{Type: Update, ID: "o3", Properties: PropertiesOf(map[string]json.RawMessage{"x": []byte("99"), "y": []byte("true")})}, {Type: Remove, ID: "o49"}, {Type: Remove, ID: "o7"},
		{Type: Transfer, ID: "o5", Owner: "b", Epoch: 2}}, nil)
	want := map[uint32]Object{}
	w.Range(func(o Object) bool { want[o.Slot] = o; return true })
	got := 0
	w.RangeDigests(func(slot uint32, owner string, idHash, digest uint64) bool {
		o, ok := want[slot]
		if !ok || o.Owner != owner || o.IDHash() != idHash || o.Digest != digest {
			t.Errorf("slot %d: %s %x %x, want %+v", slot, owner, idHash, digest, o)
		}
		if d := ObjectDigest(IDHash(o.ID), o.Owner, o.Epoch, o.Properties.Hash()); d != digest {
			t.Errorf("%s: digest %x, want %x", o.ID, digest, d)
		}
		got++
		return true
	})
	if got != len(want) || got != 48 {
		t.Fatalf("RangeDigests saw %d objects, the world holds %d", got, len(want))
	}

	// The partial passes see exactly what the whole pass sees of them.
	type seen struct {
		owner  string
		digest uint64
	}
	collect := func(rng func(fn func(uint32, string, uint64, uint64) bool)) map[uint32]seen {
		m := map[uint32]seen{}
		rng(func(slot uint32, owner string, _, digest uint64) bool { m[slot] = seen{owner, digest}; return true })
		return m
	}
	all := collect(w.RangeDigests)
	byOwner := func(owners ...string) map[uint32]seen {
		m := map[uint32]seen{}
		for slot, v := range all {
			if slices.Contains(owners, v.owner) {
				m[slot] = v
			}
		}
		return m
	}
	tests := []struct {
		owners []string
		want   map[uint32]seen
	}{
		{[]string{"a"}, byOwner("a")},
		{[]string{"b"}, byOwner("b")},
		{[]string{"a", "b"}, all},
		{[]string{"nobody"}, map[uint32]seen{}},
	}
	for _, tt := range tests {
		got := collect(func(fn func(uint32, string, uint64, uint64) bool) { w.RangeDigestsOf(tt.owners, fn) })
		if !maps.Equal(got, tt.want) {
			t.Errorf("RangeDigestsOf(%v): %d objects, want %d", tt.owners, len(got), len(tt.want))
		}
	}
	slots := []uint32{0, 5, 7, 49, 1000} // o7 and o49 were removed: free slots
	got2 := collect(func(fn func(uint32, string, uint64, uint64) bool) { w.RangeDigestsAt(slots, fn) })
	want2 := map[uint32]seen{}
	for _, s := range slots {
		if v, ok := all[s]; ok {
			want2[s] = v
		}
	}
	if !maps.Equal(got2, want2) || len(got2) != 2 {
		t.Errorf("RangeDigestsAt(%v) = %v, want %v", slots, got2, want2)
	}
	// Removing every object of an owner forgets it.
	w.Apply([]Change{{Type: Remove, ID: "o5"}}, nil)
	if _, ok := w.owned["b"]; ok || w.CountOf([]string{"a", "b"}) != 47 {
		t.Errorf("after b's last object went: b indexed %v, %d objects of a and b, want 47", ok, w.CountOf([]string{"a", "b"}))
	}
}

// The hashes the world computes on every change allocate nothing.
func TestDigestAllocations(t *testing.T) {
	v := []byte(`[1,2,3]`)
	if n := testing.AllocsPerRun(100, func() {
		_ = ObjectDigest(IDHash("Zk3pQ0aa-9bLm2Xc1"), "client-8f3KQ2ab-Lm0c9Xz1", 3, PropertyHash("position", v))
	}); n != 0 {
		t.Fatalf("%v allocations per digest", n)
	}
}

// TestOwnerIndex: through random adds, transfers and removes (slots freed
// and reused), the objects RangeDigestsOf visits for each owner are the
// ones the whole pass attributes to it.
func TestOwnerIndex(t *testing.T) {
	w := New("w")
	rng := rand.New(rand.NewPCG(1, 2))
	owners := []string{"a", "b", "c", "d"}
	for step := range 5000 {
		id := fmt.Sprint("o", rng.IntN(300))
		owner := owners[rng.IntN(len(owners))]
		var c Change
		switch rng.IntN(4) {
		case 0, 1:
			c = Change{Type: Add, ID: id, Owner: owner, Properties: PropertiesOf(map[string]json.RawMessage{"n": []byte(fmt.Sprint(step))})}
		case 2:
			c = Change{Type: Transfer, ID: id, Owner: owner}
		default:
			c = Change{Type: Remove, ID: id}
		}
		w.Apply([]Change{c}, nil)
		if step%250 != 0 {
			continue
		}
		for _, o := range owners {
			want := map[uint32]uint64{}
			w.RangeDigests(func(slot uint32, owner string, _, digest uint64) bool {
				if owner == o {
					want[slot] = digest
				}
				return true
			})
			got := map[uint32]uint64{}
			w.RangeDigestsOf([]string{o}, func(slot uint32, owner string, _, digest uint64) bool {
				got[slot] = digest
				return true
			})
			if !maps.Equal(got, want) || w.CountOf([]string{o}) != len(want) {
				t.Fatalf("step %d, owner %s: the index has %d objects (count %d), the world %d", step, o, len(got), w.CountOf([]string{o}), len(want))
			}
			var ids []string
			w.Range(func(obj Object) bool {
				if obj.Owner == o {
					ids = append(ids, obj.ID)
				}
				return true
			})
			slices.Sort(ids)
			gotIDs := w.IDsOf(nil, []string{o}, 0)
			slices.Sort(gotIDs)
			if !slices.Equal(gotIDs, ids) {
				t.Fatalf("step %d, owner %s: IDsOf = %v, the world %v", step, o, gotIDs, ids)
			}
			if len(ids) > 3 {
				if part := w.IDsOf([]string{"x"}, []string{o}, 3); len(part) != 4 || part[0] != "x" || !slices.Contains(ids, part[3]) {
					t.Fatalf("step %d, owner %s: IDsOf with a max of 3 after one id = %v", step, o, part)
				}
			}
		}
	}
}
