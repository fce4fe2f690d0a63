package gameworld

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/solipsism/mesh/scope"
)

func delta(t *testing.T, js string) scope.Delta {
	t.Helper()
	d, err := scope.Limits{}.DecodeDelta([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func scopeJSON(o Object, name string) string {
	b, _ := o.Scopes.AppendJSON(nil, name)
	return string(b)
}

func TestScopes(t *testing.T) {
	w, copyOf := New("w"), New("c")
	both := func(changes ...Change) Applied {
		t.Helper()
		res := w.Apply(changes, nil)
		// The copy takes what the world recorded, as a peer would.
		var fwd []Change
		for _, r := range res.Records {
			fwd = append(fwd, r.Change)
		}
		if got := copyOf.Apply(fwd, nil); len(got.Refused) > 0 {
			t.Fatalf("the copy refused %v", got.Refused[0].Err)
		}
		a, _ := w.Get("grid")
		b, _ := copyOf.Get("grid")
		if a.Digest != b.Digest || scopeJSON(a, "blocks") != scopeJSON(b, "blocks") {
			t.Fatalf("copies differ: %s %s", scopeJSON(a, "blocks"), scopeJSON(b, "blocks"))
		}
		return res
	}
	res := both(Change{Type: Add, ID: "grid", Owner: "w", Properties: props("position", "[0,0,0]"),
		Scopes: map[string]scope.Delta{"blocks": delta(t, `{"ver":0,"added":{"0,0,0":{"t":"stone"}}}`)}})
	if d := res.Records[0].Scopes["blocks"]; d.Ver != 1 || len(d.Added) != 1 {
		t.Fatalf("add: %+v", d)
	}
	o, _ := w.Get("grid")
	_, size := w.Size()
	if want := int64(len("position[0,0,0]") + len(`0,0,0{"t":"stone"}`)); size != want {
		t.Fatalf("size %d, want %d", size, want)
	}
	digest := o.Digest

	res = both(Change{Type: Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": delta(t, `{"ver":2,"modified":{"0,0,0":{"c":3}},"added":{"1,0,0":{"t":"dirt"}}}`)}})
	if b, _ := json.Marshal(res.Records[0].Scopes["blocks"]); string(b) != `{"ver":2,"added":{"1,0,0":{"t":"dirt"}},"modified":{"0,0,0":{"c":3}}}` {
		t.Fatalf("update record: %s", b)
	}
	o, _ = w.Get("grid")
	if o.Digest == digest || o.Version != 2 || scopeJSON(o, "blocks") != `{"0,0,0":{"c":3,"t":"stone"},"1,0,0":{"t":"dirt"}}` {
		t.Fatalf("after update: %s, version %d", scopeJSON(o, "blocks"), o.Version)
	}

	// Stale and gapped changes are refused whole: the property neither.
	res = w.Apply([]Change{{Type: Update, ID: "grid", Properties: props("color", `"red"`), Scopes: map[string]scope.Delta{"blocks": delta(t, `{"ver":2,"removed":["0,0,0"]}`)}}}, nil)
	if len(res.Refused) != 1 || !errors.Is(res.Refused[0].Err, scope.ErrStale) || !errors.Is(res.Refused[0].Err, ErrScope) {
		t.Fatalf("stale: %+v", res)
	}
	res = w.Apply([]Change{{Type: Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": delta(t, `{"ver":9,"removed":["0,0,0"]}`)}}}, nil)
	if len(res.Refused) != 1 || !errors.Is(res.Refused[0].Err, scope.ErrGap) {
		t.Fatalf("gap: %+v", res)
	}
	if o, _ := w.Get("grid"); o.Properties.Value("color") != nil || o.Scopes.Len("blocks") != 2 {
		t.Fatal("a refused change changed something")
	}

	// A batch coalesces an object's scope changes into one record.
	res = both(
		Change{Type: Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": {Removed: []string{"0,0,0"}}}},
		Change{Type: Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": {Modified: map[string]scope.Fields{"1,0,0": {"c": json.RawMessage("1")}}}}},
	)
	if b, _ := json.Marshal(res.Records[0].Scopes["blocks"]); len(res.Records) != 1 || string(b) != `{"ver":4,"base":2,"modified":{"1,0,0":{"c":1}},"removed":["0,0,0"]}` {
		t.Fatalf("coalesced: %d records, %s", len(res.Records), b)
	}

	// A block added and removed in one batch: the copy takes a delta that
	// changes nothing there, and still follows the version (both compares
	// digests, which hold it).
	both(
		Change{Type: Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": {Added: map[string]scope.Fields{"9,9,9": {"c": json.RawMessage("1")}}}}},
		Change{Type: Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": {Removed: []string{"9,9,9"}}}},
	)
	if o, _ := copyOf.Get("grid"); o.Scopes.Ver("blocks") != 6 {
		t.Fatalf("the copy is at version %d, want 6", o.Scopes.Ver("blocks"))
	}

	// A transfer carries the scopes whole.
	res = both(Change{Type: Transfer, ID: "grid", Owner: "x", Epoch: 1, Stated: true})
	if d := res.Records[0].Scopes["blocks"]; !d.Full || d.Ver != 6 || len(d.Added) != 1 {
		t.Fatalf("transfer: %+v", d)
	}
	// The digest of a whole-object record is the object's.
	o, _ = w.Get("grid")
	if d := ChangeDigest(Change{Type: Add, ID: "grid", Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties, Scopes: o.Scopes.Snapshots()}); d != o.Digest {
		t.Fatalf("ChangeDigest %x, the object's %x", d, o.Digest)
	}
	both(rem("grid"))
	if n, size := w.Size(); n != 0 || size != 0 {
		t.Fatalf("after remove: %d objects, %d bytes", n, size)
	}
}
