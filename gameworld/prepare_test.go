package gameworld

import (
	"errors"
	"testing"
)

// An update prepared ahead of Apply gives exactly what Apply would have
// worked out itself, whatever happened to its object in between: the same
// records and the same object (properties, version, digest) as a world
// that was not asked to prepare anything. What was prepared is taken only
// while the object is at the version it was prepared against.
func TestPrepare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   Change
		between  []Change // applied after Prepare, before the change
		check    error    // what Prepare's check says
		prepared bool     // whether Prepare prepares it
		used     bool     // whether Apply still finds it prepared
	}{
		{"an update", upd("a", "x", "2", "y", "1"), nil, nil, true, true},
		{"an update that changes nothing", upd("a", "x", "1", "y", "1"), nil, nil, true, true},
		{"an add of the same owner's object", add("a", "me", "x", "3"), nil, nil, true, true},
		{"an add under another owner", add("a", "you", "x", "3"), nil, nil, false, false},
		{"an add of a new object", add("b", "me", "x", "3"), nil, nil, false, false},
		{"an update of no object", upd("b", "x", "3"), nil, nil, false, false},
		{"a remove", rem("a"), nil, nil, false, false},
		{"refused by its check", upd("a", "x", "2"), nil, errors.New("too big"), false, false},
		{"its object changed meanwhile", upd("a", "x", "2", "z", "1"), []Change{upd("a", "x", "5", "y", "7")}, nil, true, false},
		{"its object changed to what it sets", upd("a", "x", "2"), []Change{upd("a", "x", "2")}, nil, true, false},
		{"its object went and came back", upd("a", "x", "2"), []Change{rem("a"), add("a", "me", "x", "1", "y", "1")}, nil, true, false},
		{"an update of nothing meanwhile", upd("a", "x", "2"), []Change{upd("a", "x", "1")}, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var worlds [2]*World
			for k := range worlds {
				worlds[k] = New("me")
				worlds[k].Apply([]Change{add("a", "me", "x", "1", "y", "1")}, nil)
			}
			c := tc.change
			var seen *Object
			got := worlds[0].Prepare(&c, func(_ Change, existing *Object) error { seen = existing; return tc.check })
			if got != tc.prepared {
				t.Fatalf("Prepare = %v, want %v", got, tc.prepared)
			}
			if got && (seen == nil || seen.ID != "a") {
				t.Fatalf("check saw %v, want object a", seen)
			}
			var recs [2]string
			for k, w := range worlds {
				w.Apply(tc.between, nil)
				cs := []Change{tc.change}
				if k == 0 {
					cs[0] = c
					o := w.objs[c.ID]
					if used := c.PreparedFor(o); used != tc.used {
						t.Fatalf("PreparedFor = %v, want %v", used, tc.used)
					}
				}
				recs[k] = summary(w.Apply(cs, nil).Records)
			}
			if recs[0] != recs[1] {
				t.Fatalf("records %q, want %q", recs[0], recs[1])
			}
			a, aok := worlds[0].Get("a")
			b, bok := worlds[1].Get("a")
			if aok != bok || (aok && (!a.Properties.Equal(b.Properties) || a.Version != b.Version || a.Digest != b.Digest || a.Owner != b.Owner)) {
				t.Fatalf("object %+v, want %+v", a, b)
			}
			if s0, s1 := worlds[0].size.Load(), worlds[1].size.Load(); s0 != s1 {
				t.Fatalf("world size %d, want %d", s0, s1)
			}
		})
	}
}
