package alloverse

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

func TestRevisionArithmetic(t *testing.T) {
	for _, c := range []struct {
		from, to uint64
		dist     uint64
		newer    bool
	}{
		{1, 2, 1, true},
		{2, 1, revSpace - 1, false},
		{MaxRevision, 0, 1, true},
		{MaxRevision - 1, 1, 3, true},
		{0, MaxRevision, MaxRevision, false},
		{5, 5, 0, false},
	} {
		t.Run(fmt.Sprintf("%d→%d", c.from, c.to), func(t *testing.T) {
			if d := revDistance(c.from, c.to); d != c.dist {
				t.Errorf("distance %d, want %d", d, c.dist)
			}
			if n := isNewer(c.to, c.from); n != c.newer {
				t.Errorf("newer %v, want %v", n, c.newer)
			}
		})
	}
	if nextRevision(MaxRevision) != 0 || nextRevision(0) != 1 {
		t.Error("the revision after 2^53 is 0")
	}
}

func TestParseRevision(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"1.2e1", 12, true}, {"9007199254740992", MaxRevision, true},
		{"9007199254740993", 0, false}, {"18446744073709551616", 0, false}, {"-1", 0, false}, {"1.5", 0, false},
		{`"7"`, 0, false}, {"1e400", 0, false}, {"null", 0, false}, {"", 0, false}, {"true", 0, false}, {"[1]", 0, false},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, ok := parseRevision(json.RawMessage(c.in))
			if ok != c.ok || (ok && got != c.want) {
				t.Errorf("got %d %v, want %d %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// randValue returns a random JSON value: nested objects and arrays, nulls,
// unicode, keys with / and ~.
func randValue(r *rand.Rand, depth int) any {
	keys := []string{"a", "b", "a/b", "~0", "m~n", "é", "😀", "", " ", "x.y"}
	switch n := r.IntN(9); {
	case n == 0 && depth < 3:
		m := map[string]any{}
		for range r.IntN(4) {
			m[keys[r.IntN(len(keys))]] = randValue(r, depth+1)
		}
		return m
	case n == 1 && depth < 3:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randValue(r, depth+1)
		}
		return a
	case n == 2:
		return nil
	case n == 3:
		return r.IntN(1000)
	case n == 4:
		return r.Float64()
	case n == 5:
		return r.IntN(2) == 0
	case n == 6:
		return "ü/~" + keys[r.IntN(len(keys))]
	}
	return []float64{r.Float64(), r.Float64(), r.Float64(), 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}
}

func randProps(r *rand.Rand, nullOK bool) gameworld.Properties {
	names := []string{"transform", "geometry", "ui", "a/b", "t~x", "ñame"}
	p := gameworld.PropertiesOf(map[string]json.RawMessage{})
	for range 1 + r.IntN(4) {
		v := randValue(r, 0)
		if v == nil && !nullOK {
			continue
		}
		b, _ := json.Marshal(v)
		p = p.With(names[r.IntN(len(names))], b)
	}
	return p
}

// TestDiffsReproduceDocuments: for random worlds and change sequences, the
// packet for every acknowledged revision in history, applied to the
// document of that revision, gives exactly the current document, through
// evanphx/json-patch and through this test's own reading of the RFCs.
func TestDiffsReproduceDocuments(t *testing.T) {
	for _, style := range []PatchStyle{Smallest, Merge, Apply} {
		for seed := range uint64(5) {
			t.Run(fmt.Sprintf("style%d/seed%d", style, seed), func(t *testing.T) {
				t.Parallel()
				checkRandomHistory(t, style, seed, MaxRevision-20)
			})
		}
	}
}

func checkRandomHistory(t *testing.T, style PatchStyle, seed uint64, first uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	s := newState(first, 16, style)
	docs := map[uint64][]byte{first: docOf(s)}
	world := map[string]gameworld.Properties{}
	ids := []string{"e1", "e/2", "e~3", "ë4", "e5", "e6"}
	forms := map[string]int{}
	for step := range 60 {
		for range 1 + r.IntN(4) {
			id := ids[r.IntN(len(ids))]
			cur, exists := world[id]
			var d relay.Delivery
			switch op := r.IntN(4); {
			case !exists:
				p := randProps(r, false)
				world[id] = p
				d = relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: id, Properties: p}, After: p}
			case op == 0:
				delete(world, id)
				d = relay.Delivery{Change: gameworld.Change{Type: gameworld.Remove, ID: id}}
			default:
				delta := randProps(r, true)
				after := cur.Merge(delta)
				world[id] = after
				d = relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: id, Properties: delta}, After: after}
			}
			s.apply(d)
		}
		if !s.commit() {
			continue
		}
		now := docOf(s)
		docs[s.rev] = now
		checkDocument(t, now, world)
		for base, doc := range docs {
			if !s.inHistory(base) || base == s.rev {
				continue
			}
			if base == 0 {
				// Revision 0, after the wrap: its ack asks for a set.
				if p := s.packet(0); !sameJSON(append([]byte{'{'}, p[len(`{"patch_style":"set",`):]...), now) {
					t.Fatalf("set for ack 0: %s", p)
				}
				continue
			}
			pkt := s.packet(base)
			var m map[string]json.RawMessage
			if err := json.Unmarshal(pkt, &m); err != nil {
				t.Fatalf("step %d: packet is not JSON: %v\n%s", step, err, pkt)
			}
			style := string(m["patch_style"])
			forms[style]++
			got, ref := applyPacket(t, doc, m)
			if !sameJSON(got, now) || !sameJSON(ref, now) {
				t.Fatalf("step %d, %s diff %d→%d:\nbase %s\npacket %s\ngot %s\nref %s\nwant %s", step, style, base, s.rev, doc, pkt, got, ref, now)
			}
		}
	}
	if style == Apply && forms[`"merge"`] > 0 {
		t.Errorf("apply style sent merge patches: %v", forms)
	}
	t.Logf("packets: %v", forms)
}

// docOf returns the state's document.
func docOf(s *state) []byte {
	p := s.setPacket()
	return append([]byte{'{'}, p[len(`{"patch_style":"set",`):]...)
}

// checkDocument checks the document against the world: every object an
// entity, every non-null property a component.
func checkDocument(t *testing.T, doc []byte, world map[string]gameworld.Properties) {
	t.Helper()
	var d struct {
		Entities map[string]struct {
			ID         string                     `json:"id"`
			Components map[string]json.RawMessage `json:"components"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Entities) != len(world) {
		t.Fatalf("%d entities for %d objects", len(d.Entities), len(world))
	}
	for id, p := range world {
		e := d.Entities[id]
		n := 0
		for k, v := range p.All() {
			if string(v) == "null" {
				continue
			}
			n++
			if !sameJSON(e.Components[k], v) {
				t.Fatalf("%s.%s = %s, want %s", id, k, e.Components[k], v)
			}
		}
		if e.ID != id || len(e.Components) != n {
			t.Fatalf("entity %s: %+v, want %v", id, e, p)
		}
	}
}

// applyPacket applies a diff packet to doc with the package's patch
// functions and with the reference below.
func applyPacket(t *testing.T, doc []byte, m map[string]json.RawMessage) (got, ref []byte) {
	t.Helper()
	style := string(m["patch_style"])
	delete(m, "patch_style")
	delete(m, "patch_from")
	var err error
	switch style {
	case `"merge"`:
		patch, _ := json.Marshal(m)
		if got, err = MergePatch(doc, patch); err != nil {
			t.Fatal(err)
		}
		d, _ := decodeJSON(doc)
		p, _ := decodeJSON(patch)
		ref, _ = json.Marshal(refMerge(d, p))
	case `"apply"`:
		if got, err = ApplyPatch(doc, m["patches"]); err != nil {
			t.Fatalf("%v\n%s", err, m["patches"])
		}
		ref = refApply(t, doc, m["patches"])
	default:
		t.Fatalf("diff packet of style %s", style)
	}
	return got, ref
}

// refMerge is RFC 7396 section 2, as written.
func refMerge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = refMerge(t[k], v)
		}
	}
	return t
}

// refApply applies the add, remove and replace operations the bridge
// sends, to objects, as RFC 6902 sections 4.1 to 4.3 say.
func refApply(t *testing.T, doc, patch []byte) []byte {
	t.Helper()
	root, _ := decodeJSON(doc)
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		toks := strings.Split(op.Path[1:], "/")
		for i := range toks {
			toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i])
		}
		parent, last := root, toks[len(toks)-1]
		for _, tok := range toks[:len(toks)-1] {
			parent = parent.(map[string]any)[tok]
		}
		obj := parent.(map[string]any)
		switch op.Op {
		case "remove":
			if _, ok := obj[last]; !ok {
				t.Fatalf("remove of missing %s", op.Path)
			}
			delete(obj, last)
		case "replace":
			if _, ok := obj[last]; !ok {
				t.Fatalf("replace of missing %s", op.Path)
			}
			fallthrough
		case "add":
			obj[last], _ = decodeJSON(op.Value)
		default:
			t.Fatalf("unexpected op %s", op.Op)
		}
	}
	out, _ := json.Marshal(root)
	return out
}

// TestMergeFallback: where merge cannot express a change exactly, the
// merge style sends apply instead.
func TestMergeFallback(t *testing.T) {
	for _, c := range []struct {
		name      string
		from, to  string
		wantMerge bool
	}{
		{"scalar", `1`, `2`, true},
		{"object member changed", `{"a":1,"b":2}`, `{"a":1,"b":3}`, true},
		{"object member removed", `{"a":1,"b":2}`, `{"a":1}`, true},
		{"object member set to null", `{"a":1}`, `{"a":null}`, false},
		{"nested null in a new object", `1`, `{"a":{"b":null}}`, false},
		{"nulls inside an array", `[1]`, `[null,[null]]`, true},
		{"null member inside an array", `[1]`, `[null,{"a":null}]`, false},
		{"object to array", `{"a":1}`, `[1]`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newState(0, 8, Merge)
			put := func(v string) {
				p := gameworld.PropertiesOf(map[string]json.RawMessage{"c": json.RawMessage(v)})
				s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: "e"}, After: p})
				s.commit()
			}
			put(c.from)
			base, doc := s.rev, docOf(s)
			put(c.to)
			pkt := s.packet(base)
			var m map[string]json.RawMessage
			json.Unmarshal(pkt, &m)
			if isMerge := string(m["patch_style"]) == `"merge"`; isMerge != c.wantMerge {
				t.Fatalf("packet %s, want merge %v", pkt, c.wantMerge)
			}
			got, ref := applyPacket(t, doc, m)
			if !sameJSON(got, docOf(s)) || !sameJSON(ref, docOf(s)) {
				t.Fatalf("got %s / %s, want %s", got, ref, docOf(s))
			}
		})
	}
}

// TestHistoryFollowsTheWorld: after a flood of entities comes and goes,
// the history holds no more than twice the (now small) world, the
// entities' map is rebuilt, and a client whose base fell out of history
// gets a set, which is then the smaller packet.
func TestHistoryFollowsTheWorld(t *testing.T) {
	s := newState(0, DefaultHistory, Smallest)
	big := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
	add := func(id string, v json.RawMessage) {
		p := gameworld.PropertiesOf(map[string]json.RawMessage{"v": v})
		s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: id, Properties: p}, After: p})
	}
	add("keep", json.RawMessage(`1`))
	s.commit()
	base := s.rev
	for i := range 5000 {
		add(fmt.Sprintf("flood-%d", i), big)
	}
	s.commit()
	for i := range 5000 {
		s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Remove, ID: fmt.Sprintf("flood-%d", i)}})
	}
	s.commit()
	add("keep", json.RawMessage(`2`))
	s.commit()
	if s.histBytes > max(2*s.worldBytes, minHistBytes) {
		t.Fatalf("history holds %d bytes for a world of %d", s.histBytes, s.worldBytes)
	}
	if s.peak != 1 || len(s.entities) != 1 {
		t.Fatalf("peak %d, %d entities: the map was not rebuilt", s.peak, len(s.entities))
	}
	if s.inHistory(base) {
		t.Fatal("the flood is still in history")
	}
	if p := s.packet(base); string(p) != string(s.setPacket()) {
		t.Fatalf("a client from before the flood gets %s, want a set", p)
	}
}
