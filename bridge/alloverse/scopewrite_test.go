package alloverse

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
)

// TestAgentWritesBlocks: an Alloverse agent that owns a grid (taken from
// the Solipsism client that made it) changes its blocks with
// change_components on the scope's component, the grid's elements whole:
// a block changed, one removed, one added and one left alone. The node
// turns that into a delta of the three: the Solipsism client's element
// events name those blocks alone, and its grid ends equal to what the
// agent wrote. A write to a grid the agent does not own, and a scope's
// component that is not an object of elements, are refused and change
// nothing.
func TestAgentWritesBlocks(t *testing.T) {
	p := startPlace(t, Options{})
	sol := p.solipsist(t, "sol")
	for _, id := range []string{"grid", "other"} {
		if err := sol.CreateWithID(id, map[string]any{"kind": "grid", "transferable": id == "grid"}); err != nil {
			t.Fatal(err)
		}
		if err := sol.SetElements(id, "blocks", map[string]map[string]any{"a": {"t": "stone", "n": 1}, "b": {"t": "dirt"}, "c": {"t": "sand"}}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var touched []string
	sol.Subscribe(func(e client.Event) {
		e.Elements(func(ee client.ElementEvent) {
			mu.Lock()
			defer mu.Unlock()
			if e.ID == "grid" {
				touched = append(touched, ee.ID)
			}
		})
	})
	c := p.agent(t, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	caughtUp(t, p, c)
	_, agent, err := c.Announce(ctx, map[string]any{"geometry": "avatar"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Request(ctx, "take_ownership", "grid"); err != nil || responseError(r) != nil {
		t.Fatalf("take the grid: %s %v", r, err)
	}
	waitFor(t, "the client sees the grid taken", 5*time.Second, func() bool {
		o, _ := sol.World().Get("grid")
		return o.Owner == agent
	})
	mu.Lock()
	touched = nil // (the transfer brought the grid whole)
	mu.Unlock()
	want := map[string]map[string]any{"a": {"t": "gold"}, "b": {"t": "dirt"}, "d": {"t": "glass"}}
	if r, err := c.Request(ctx, "change_components", "grid", "add_or_change", map[string]any{"blocks": want, "lit": true}); err != nil || responseError(r) != nil {
		t.Fatalf("the owner's blocks: %s %v", r, err)
	}
	wantJSON, _ := json.Marshal(want)
	waitFor(t, "the client's grid", 5*time.Second, func() bool {
		o, _ := sol.World().Get("grid")
		b, _ := o.Scopes.AppendJSON(nil, "blocks")
		return sameJSON(b, wantJSON) && string(o.Properties.Value("lit")) == "true"
	})
	mu.Lock()
	got := append([]string(nil), touched...)
	mu.Unlock()
	if want := []string{"a", "c", "d"}; !sameSet(got, want) {
		t.Errorf("the client's element events named %v, want %v", got, want)
	}

	for _, bad := range []any{map[string]any{"x": map[string]any{"t": "gold"}}, "not elements"} {
		target := "other"
		if _, ok := bad.(string); ok {
			target = "grid"
		}
		if r, err := c.Request(ctx, "change_components", target, "add_or_change", map[string]any{"blocks": bad}); err != nil || responseError(r) == nil {
			t.Fatalf("change_components %s %v: %s %v, want an error", target, bad, r, err)
		}
	}
	for id, w := range map[string]string{"other": `{"a":{"n":1,"t":"stone"},"b":{"t":"dirt"},"c":{"t":"sand"}}`, "grid": string(wantJSON)} {
		o, _ := p.node.World().Get(id)
		if b, _ := o.Scopes.AppendJSON(nil, "blocks"); !sameJSON(b, []byte(w)) {
			t.Errorf("%s's blocks are %s, want %s", id, b, w)
		}
	}
}

// sameSet reports whether a and b hold the same strings (a block replaced
// whole is named twice: removed, then added).
func sameSet(a, b []string) bool {
	return reflect.DeepEqual(setOf(a), setOf(b))
}

func setOf(a []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	return m
}
