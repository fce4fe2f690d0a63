package gameworld

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestProperties(t *testing.T) {
	m := func(kv ...string) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = json.RawMessage(kv[i+1])
		}
		return out
	}
	tests := []struct {
		name      string
		p, q      map[string]json.RawMessage
		merged    map[string]json.RawMessage
		covers    bool // p covers q
		shared    int
		sharedLen int64
	}{
		{name: "both empty", p: m(), q: m(), merged: m(), covers: true},
		{name: "disjoint", p: m("a", "1"), q: m("b", "2"), merged: m("a", "1", "b", "2")},
		{name: "q wins", p: m("a", "1", "b", "2"), q: m("b", "3"), merged: m("a", "1", "b", "3"), covers: true, shared: 1, sharedLen: 2},
		{name: "interleaved", p: m("a", "1", "c", "3", "e", "5"), q: m("b", "2", "c", "[9]", "f", "6"), merged: m("a", "1", "b", "2", "c", "[9]", "e", "5", "f", "6"),
			shared: 1, sharedLen: 2},
		{name: "prefix names", p: m("pos", "1", "position", "[1,2,3]"), q: m("position", "null"), merged: m("pos", "1", "position", "null"), covers: true, shared: 1, sharedLen: 15},
		{name: "unicode and long", p: m("ñame", `"x"`, string(make([]byte, 200)), "1"), q: m(), merged: m("ñame", `"x"`, string(make([]byte, 200)), "1"), covers: true},
		{name: "nil p", p: nil, q: m("a", "1"), merged: m("a", "1")},
		{name: "same names", p: m("a", "1", "b", "2"), q: m("a", "3", "b", "4"), merged: m("a", "3", "b", "4"), covers: true, shared: 2, sharedLen: 4},
		{name: "names that concatenate alike", p: m("ab", "1"), q: m("a", "1", "b", "1"), merged: m("a", "1", "ab", "1", "b", "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, q := PropertiesOf(tt.p), PropertiesOf(tt.q)
			if p.IsZero() != (tt.p == nil) {
				t.Fatalf("IsZero = %v for %v", p.IsZero(), tt.p)
			}
			if !maps.EqualFunc(p.Map(), tt.p, func(a, b json.RawMessage) bool { return string(a) == string(b) }) || p.Len() != len(tt.p) {
				t.Fatalf("round trip: %v, want %v", p, tt.p)
			}
			for k, v := range tt.p {
				if got, ok := p.Get(k); !ok || string(got) != string(v) {
					t.Fatalf("Get(%q) = %s, %v", k, got, ok)
				}
			}
			if _, ok := p.Get("zz-missing"); ok {
				t.Fatal("Get of a missing name")
			}
			got := p.Merge(q)
			want := PropertiesOf(tt.merged)
			if !got.Equal(want) {
				t.Fatalf("Merge = %v, want %v", got, want)
			}
			if p.Covers(q) != tt.covers {
				t.Fatalf("Covers = %v", !tt.covers)
			}
			// Names are equal exactly when the name sets are: each covers
			// the other.
			if same := p.Names() == q.Names(); same != (p.Covers(q) && q.Covers(p)) {
				t.Fatalf("Names equal = %v, covering both ways = %v", same, !same)
			}
			if n, size := p.Shared(q); n != tt.shared || size != tt.sharedLen {
				t.Fatalf("Shared = %d, %d; want %d, %d", n, size, tt.shared, tt.sharedLen)
			}
			var names []string
			for k := range p.All() {
				names = append(names, k)
			}
			if !slices.IsSorted(names) {
				t.Fatalf("All not in name order: %q", names)
			}
			var h uint64
			var size int64
			for k, v := range tt.p {
				h += PropertyHash(k, v)
				size += int64(len(k) + len(v))
			}
			if p.Hash() != h || p.Size() != size {
				t.Fatalf("Hash, Size = %x, %d; want %x, %d", p.Hash(), p.Size(), h, size)
			}
		})
	}
}

func TestPropertiesBuilderLaterWins(t *testing.T) {
	var b PropertiesBuilder
	b.Add("a", []byte("1"))
	b.Add("b", []byte("2"))
	b.Add("a", []byte("3"))
	p := b.Build()
	if p.String() != `{"a":3,"b":2}` {
		t.Fatalf("got %v", p)
	}
	if q := b.Build(); q.IsZero() || !q.Empty() {
		t.Fatalf("a reused builder gave %v", q)
	}
	if got := p.With("c", []byte("4")).Without("a"); got.String() != `{"b":2,"c":4}` {
		t.Fatalf("With, Without: %v", got)
	}
	if p.String() != `{"a":3,"b":2}` {
		t.Fatal("With changed its receiver")
	}
}

func TestPropertiesJSON(t *testing.T) {
	var p Properties
	if err := json.Unmarshal([]byte(`{"b":[1, 2],"a\"":"x"}`), &p); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil || string(b) != `{"a\"":"x","b":[1,2]}` {
		t.Fatalf("got %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`[1]`), &p); err == nil {
		t.Fatal("an array decoded as properties")
	}
	var z Properties
	if b, _ := json.Marshal(z); string(b) != "null" {
		t.Fatalf("zero: %s", b)
	}
}

// TestPropertiesMergeLikeMaps checks Merge, Get and Hash against Go maps
// on random sets.
func TestPropertiesMergeLikeMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"", "a", "ab", "b", "position", "rotation", "ñ", "z"}
	random := func() map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for range r.IntN(len(names)) {
			m[names[r.IntN(len(names))]] = json.RawMessage(`"` + names[r.IntN(len(names))] + `"`)
		}
		return m
	}
	for range 2000 {
		a, b := random(), random()
		want := maps.Clone(a)
		maps.Copy(want, b)
		got := PropertiesOf(a).Merge(PropertiesOf(b))
		if !got.Equal(PropertiesOf(want)) || got.Hash() != PropertiesOf(want).Hash() {
			t.Fatalf("%v + %v = %v, want %v", a, b, got, want)
		}
	}
}

func FuzzPropertiesJSON(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"c":[1,2]}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"\u0000":"x","a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Properties
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		b, err := p.MarshalJSON() // (json.Marshal would escape HTML in values)
		if err != nil {
			t.Fatal(err)
		}
		var q Properties
		if err := json.Unmarshal(b, &q); err != nil || !q.Equal(p) {
			t.Fatalf("%s: re-decoded %v (%v), was %v", b, q, err, p)
		}
		n := 0
		for k, v := range p.All() {
			if got, ok := p.Get(k); !ok || string(got) != string(v) {
				t.Fatalf("Get(%q) = %s", k, got)
			}
			n++
		}
		if n != p.Len() {
			t.Fatalf("Len %d, All %d", p.Len(), n)
		}
	})
}
