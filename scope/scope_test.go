package scope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func f(kv ...any) Fields {
	out := Fields{}
	for i := 0; i < len(kv); i += 2 {
		b, _ := json.Marshal(kv[i+1])
		out[kv[i].(string)] = b
	}
	return out
}

// same reports whether a replica holds exactly the scope's elements.
func same(t *testing.T, s *Scope, r *Replica) {
	t.Helper()
	if s.Len() != r.Len() {
		t.Fatalf("the scope holds %d elements, the replica %d", s.Len(), r.Len())
	}
	for id := range s.elems.all() {
		want, _ := s.Get(id)
		got, ok := r.Get(id)
		if !ok || !reflect.DeepEqual(encode(want), encode(got)) {
			t.Fatalf("element %s: scope %s, replica %s", id, encode(want), encode(got))
		}
	}
}

func events(t *testing.T, r *Replica, d Delta) ([]string, error) {
	t.Helper()
	var out []string
	err := r.Apply(d, func(e Event) { out = append(out, fmt.Sprintf("%s %s %s", e.Kind, e.ID, encode(e.Fields))) })
	return out, err
}

// The seed's quick tests: one block created, modified, removed gives the
// expected delta, each applied as the expected event.
func TestSingleBlock(t *testing.T) {
	s, r := New(), NewReplica()
	for _, step := range []struct {
		name    string
		do      func()
		delta   string
		event   string
		noDelta bool
	}{
		{"create", func() { s.Set("1,2,3", f("type", "stone", "color", 7)) },
			`{"ver":1,"added":{"1,2,3":{"color":7,"type":"stone"}}}`, `added 1,2,3 {"color":7,"type":"stone"}`, false},
		{"modify one field", func() { s.Set("1,2,3", f("color", 9)) },
			`{"ver":2,"modified":{"1,2,3":{"color":9}}}`, `modified 1,2,3 {"color":9}`, false},
		{"set to the same value", func() { s.Set("1,2,3", f("color", 9)) }, ``, ``, true},
		{"remove", func() { s.Remove("1,2,3") },
			`{"ver":3,"removed":["1,2,3"]}`, `removed 1,2,3 {}`, false},
	} {
		step.do()
		d := s.Tick()
		if step.noDelta {
			if !d.Empty() || d.Ver != s.Ver() {
				t.Fatalf("%s: a delta %+v", step.name, d)
			}
			continue
		}
		b, _ := json.Marshal(d)
		if string(b) != step.delta {
			t.Fatalf("%s: delta %s, want %s", step.name, b, step.delta)
		}
		evs, err := events(t, r, d)
		if err != nil || len(evs) != 1 || evs[0] != step.event {
			t.Fatalf("%s: events %q, %v; want %q", step.name, evs, err, step.event)
		}
		same(t, s, r)
	}
}

// Applying a delta twice changes nothing; an older one is refused.
func TestIdempotentAndOlderRejected(t *testing.T) {
	s, r := New(), NewReplica()
	s.Set("a", f("v", 1))
	d1 := s.Tick()
	s.Set("a", f("v", 2))
	d2 := s.Tick()
	for _, d := range []Delta{d1, d2} {
		if err := r.Apply(d, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []Delta{d2, d1} {
		evs, err := events(t, r, d)
		if !errors.Is(err, ErrStale) || len(evs) != 0 {
			t.Fatalf("a delta of version %d again: %v, events %q", d.Ver, err, evs)
		}
	}
	same(t, s, r)
}

// A lost delta: the next one, built on it, is refused as a gap; the
// owner's Since(the replica's version) is self-contained and converges
// it; so does a snapshot.
func TestGap(t *testing.T) {
	s, r := New(), NewReplica()
	s.Set("a", f("v", 1, "w", 1))
	s.Set("b", f("v", 1))
	r.Apply(s.Tick(), nil)
	s.Set("a", f("v", 2))
	s.Remove("b")
	s.Set("c", f("v", 3))
	lost := s.Tick() // never arrives
	s.Set("a", f("w", 5))
	next := s.Tick()
	if err := r.Apply(next, nil); !errors.Is(err, ErrGap) {
		t.Fatalf("the delta after a lost one: %v, want ErrGap", err)
	}
	catchUp, ok := s.Since(r.Ver())
	if !ok {
		t.Fatal("Since refused")
	}
	evs, err := events(t, r, catchUp)
	if err != nil {
		t.Fatal(err)
	}
	same(t, s, r)
	want := []string{`removed b {}`, `modified a {"v":2,"w":5}`, `added c {"v":3}`}
	if !reflect.DeepEqual(slices.Sorted(slices.Values(evs)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("catching up: %q, want %q", evs, want)
	}
	// The lost delta, arriving late, is older: refused, harmless.
	if err := r.Apply(lost, nil); !errors.Is(err, ErrStale) {
		t.Fatalf("the late delta: %v", err)
	}
	// A fresh replica from a snapshot, then the tick deltas.
	r2 := NewReplica()
	if err := r2.Apply(s.Snapshot(), nil); err != nil {
		t.Fatal(err)
	}
	same(t, s, r2)
	s.Set("d", f("v", 4))
	if err := r2.Apply(s.Tick(), nil); err != nil {
		t.Fatal(err)
	}
	same(t, s, r2)
}

// Removals go before additions: an element removed and added again within
// one tick arrives without its old fields.
func TestRemovalsFirst(t *testing.T) {
	s, r := New(), NewReplica()
	s.Set("x", f("a", 1, "b", 2))
	r.Apply(s.Tick(), nil)
	s.Remove("x")
	s.Set("x", f("a", 3))
	d := s.Tick()
	if len(d.Removed) != 1 || d.Added["x"] == nil {
		t.Fatalf("the delta: %+v", d)
	}
	evs, err := events(t, r, d)
	if err != nil || !reflect.DeepEqual(evs, []string{`removed x {}`, `added x {"a":3}`}) {
		t.Fatalf("events %q, %v", evs, err)
	}
	same(t, s, r)
}

// Since forgets removals older than its bound: a replica behind them gets
// a snapshot instead.
func TestSinceHorizon(t *testing.T) {
	s := New()
	s.MaxTombs = 4
	for i := range 10 {
		id := fmt.Sprint(i)
		s.Set(id, f("v", i))
		s.Tick()
		s.Remove(id)
		s.Tick()
	}
	if _, ok := s.Since(1); ok {
		t.Fatal("Since from before the forgotten removals")
	}
	if _, ok := s.Since(s.Ver() - 1); !ok {
		t.Fatal("Since from a recent version refused")
	}
}

func TestDecodeDelta(t *testing.T) {
	var l Limits
	for _, tc := range []struct{ name, in, err string }{
		{"a delta", `{"ver":3,"added":{"a":{"v":1}},"modified":{"b":{"v":2}},"removed":["c","a"]}`, ""},
		{"a snapshot", `{"ver":3,"added":{"a":{"v":1}},"full":true}`, ""},
		{"no ver", `{"base":1}`, "needs ver"},
		{"base past ver", `{"ver":1,"base":2}`, "past ver"},
		{"an id twice", `{"ver":1,"added":{"a":{}},"modified":{"a":{}}}`, "twice"},
		{"an empty id", `{"ver":1,"removed":[""]}`, "1 to 256"},
		{"a snapshot that removes", `{"ver":1,"full":true,"removed":["a"]}`, "added elements only"},
		{"an unknown key", `{"ver":1,"extra":1}`, "not a delta"},
		{"not JSON", `{`, "not a delta"},
		{"data after it", `{"ver":1}{}`, "data after"},
		{"an id twice in added", `{"ver":1,"added":{"a":{},"a":{}}}`, "twice"},
		{"an id removed twice", `{"ver":1,"removed":["a","a"]}`, "twice"},
		{"removed and modified", `{"ver":1,"modified":{"a":{}},"removed":["a"]}`, "twice"},
		{"removed and added", `{"ver":1,"added":{"a":{}},"removed":["a"]}`, ""},
		{"null in removed", `{"ver":1,"removed":["a",null]}`, "not an id"},
		{"removed not a list", `{"ver":1,"removed":"a"}`, "want ["},
		{"an element not an object", `{"ver":1,"added":{"a":1}}`, "want {"},
		{"escaped names", `{"ver":1,"added":{"a\"b":{"\u0063":"<&>"}}}`, ""},
		{"a null element", `{"ver":1,"added":{"a":null}}`, ""},
		{"ver a string", `{"ver":"1"}`, "not a version"},
		{"ver negative", `{"ver":-1}`, "not a version"},
		{"ver a fraction", `{"ver":1.5}`, "not a version"},
		{"full not a boolean", `{"ver":1,"full":1}`, "not a boolean"},
		{"a long id", `{"ver":1,"removed":["` + strings.Repeat("x", 257) + `"]}`, "1 to 256"},
		{"too many fields", `{"ver":1,"added":{"a":{` + manyFields(65) + `}}}`, "over 64 fields"},
		{"invalid UTF-8", "{\"ver\":1,\"removed\":[\"\xff\"]}", "not a delta"},
	} {
		d, err := l.DecodeDelta([]byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		case err == nil:
			b := d.AppendJSON(nil)
			d2, err := l.DecodeDelta(b)
			if err != nil || !reflect.DeepEqual(d, d2) {
				t.Errorf("%s: round trip %s: %+v %v", tc.name, b, d2, err)
			}
		}
	}
}

func manyFields(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`"f%d":%d`, i, i))
	}
	return strings.Join(parts, ",")
}

// TestDecodeDeltaLimits: the element limit counts every id a delta names.
func TestDecodeDeltaLimits(t *testing.T) {
	l := Limits{MaxElements: 2}
	if _, err := l.DecodeDelta([]byte(`{"ver":1,"added":{"a":{}},"removed":["b"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DecodeDelta([]byte(`{"ver":1,"added":{"a":{}},"removed":["b","c"]}`)); err == nil || !strings.Contains(err.Error(), "over 2 elements") {
		t.Fatalf("three elements: %v", err)
	}
}

// TestDecodeDeltaCompactsAndCopies: values come compact, and do not
// share the caller's bytes.
func TestDecodeDeltaCompactsAndCopies(t *testing.T) {
	in := []byte(`{ "ver" : 2 , "modified" : { "a" : { "p" : [ 1 , 2 ] , "s" : "x y" } } }`)
	d, err := Limits{}.DecodeDelta(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(d.Modified["a"]["p"]) + string(d.Modified["a"]["s"]); got != `[1,2]"x y"` {
		t.Fatalf("values %s", got)
	}
	for i := range in {
		in[i] = 'z'
	}
	if got := string(d.Modified["a"]["s"]); got != `"x y"` {
		t.Fatalf("a value shares the input: %s", got)
	}
}

// wireDelta is a delta's JSON shape, for encoding/json (HTML escaping
// off): what AppendJSON must write byte for byte.
type wireDelta struct {
	Ver      uint64            `json:"ver"`
	Base     *uint64           `json:"base,omitempty"`
	Added    map[string]Fields `json:"added,omitempty"`
	Modified map[string]Fields `json:"modified,omitempty"`
	Removed  []string          `json:"removed,omitempty"`
	Full     bool              `json:"full,omitempty"`
}

func referenceJSON(t testing.TB, d Delta) []byte {
	w := wireDelta{Ver: d.Ver, Added: d.Added, Modified: d.Modified, Removed: d.Removed, Full: d.Full}
	if !d.Full && d.Ver != 0 && d.Base+1 != d.Ver { // (ver 0 is numbered by its receiver)
		w.Base = &d.Base
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(w); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func TestAppendJSONIsEncodingJSONs(t *testing.T) {
	for _, d := range []Delta{
		{},
		{Ver: 5, Base: 4},
		{Ver: 5, Base: 2, Removed: []string{"b", "a<"}},
		{Ver: 1, Full: true, Added: map[string]Fields{"x": {"b": json.RawMessage(`"<&>\u2028"`), "a": json.RawMessage(`[1, 2]`)}, "\x01q\"": nil}},
		{Ver: 9, Base: 8, Modified: map[string]Fields{"1,2,3": {"c": json.RawMessage(`7`)}, "0": {}}},
	} {
		if got, want := d.AppendJSON(nil), referenceJSON(t, d); string(got) != string(want) {
			t.Errorf("%+v:\n%s, want\n%s", d, got, want)
		}
	}
}

func FuzzDecodeDelta(f *testing.F) {
	f.Add([]byte(`{"ver":3,"added":{"a":{"v":1}},"modified":{"b":{"v":[1,2]}},"removed":["c","a"]}`))
	f.Add([]byte(`{"ver":1,"full":true,"added":{"1,2,3":{"t":"stone"}}}`))
	var l Limits
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := l.DecodeDelta(b)
		if err != nil {
			return
		}
		// Whatever decodes applies to a replica without breaking it, and
		// re-encodes to itself.
		r := NewReplica()
		r.Apply(d, nil)
		enc := d.AppendJSON(nil)
		if want := referenceJSON(t, d); string(enc) != string(want) {
			t.Fatalf("encoded %s, encoding/json %s", enc, want)
		}
		if _, err := l.DecodeDelta(enc); err != nil {
			t.Fatalf("re-encoded %s: %v", enc, err)
		}
	})
}

// TestRandomLossConverges: random changes, random deltas lost; a replica
// that finds a gap asks for Since its version, and ends with the scope.
func TestRandomLossConverges(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		s, r := New(), NewReplica()
		for range 300 {
			for range rng.IntN(5) {
				id := fmt.Sprint(rng.IntN(30))
				switch rng.IntN(4) {
				case 0:
					s.Remove(id)
				default:
					s.Set(id, f(fmt.Sprint("f", rng.IntN(3)), rng.IntN(4)))
				}
			}
			d := s.Tick()
			if rng.IntN(4) == 0 {
				continue // lost
			}
			if err := r.Apply(d, nil); errors.Is(err, ErrGap) {
				c, ok := s.Since(r.Ver())
				if !ok {
					c = s.Snapshot()
				}
				if err := r.Apply(c, nil); err != nil {
					t.Fatalf("seed %d: catching up: %v", seed, err)
				}
			} else if err != nil && !errors.Is(err, ErrStale) {
				t.Fatal(err)
			}
		}
		c, _ := s.Since(r.Ver())
		r.Apply(c, nil)
		same(t, s, r)
	}
}

// The palette keeps one copy of each distinct element, and lets one go
// when no element holds it.
func TestPalette(t *testing.T) {
	s := New()
	for i := range 100 {
		s.Set(fmt.Sprint(i), f("t", "stone"))
	}
	s.Set("x", f("t", "gold", "n", 1))
	if got := len(s.pal.index); got != 2 {
		t.Fatalf("%d distinct encodings, want 2", got)
	}
	s.Set("x", f("n", 2)) // the old encoding of x goes
	s.Remove("5")
	if got := len(s.pal.index); got != 2 {
		t.Fatalf("after a change: %d distinct encodings, want 2", got)
	}
	s.Remove("x")
	for i := range 100 {
		s.Remove(fmt.Sprint(i))
	}
	if got := len(s.pal.index); got != 0 || len(s.pal.free) != len(s.pal.vals) {
		t.Fatalf("empty scope: %d encodings held, %d of %d slots free", got, len(s.pal.free), len(s.pal.vals))
	}
}

// The scan decode does matches encoding/json on what encode makes.
func TestDecodeScansEncode(t *testing.T) {
	for _, in := range []string{
		`{}`, `{"c":17}`, `{"a":"x,y}","b":[1,{"c":"]"}],"c":{"d":[]},"e":null,"f":-1.5e3,"g":true}`,
		`{"q\"":"\"","<":"\\","ñ":"é","":""}`, `{"a":[[],[[]]],"b":{}}`, `{"s":"a\\\"b"}`,
	} {
		var want Fields
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		enc := encode(want)
		got := decode(enc)
		if len(got) != len(want) {
			t.Fatalf("%s: decoded %d fields, want %d", enc, len(got), len(want))
		}
		for k, v := range want {
			if string(got[k]) != string(compact(v)) {
				t.Fatalf("%s: field %q = %s, want %s", enc, k, got[k], v)
			}
		}
		if string(encode(got)) != string(enc) {
			t.Fatalf("%s re-encodes as %s", enc, encode(got))
		}
	}
}
