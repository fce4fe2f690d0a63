package alloverse

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestScopesAsNestedComponents: a grid's blocks are the elements of a
// scope; an Alloverse client sees the scope as a component holding an
// object of the blocks, follows it exactly, and each change of one block
// reaches it as a diff of about that block, merge or apply, whatever the
// grid's size.
func TestScopesAsNestedComponents(t *testing.T) {
	for name, style := range map[string]PatchStyle{"merge": Merge, "apply": Apply} {
		t.Run(name, func(t *testing.T) {
			p := startPlace(t, Options{PatchStyle: style})
			alice := p.solipsist(t, "alice")
			if err := alice.CreateWithID("grid", map[string]any{"kind": "grid"}); err != nil {
				t.Fatal(err)
			}
			blocks := map[string]map[string]any{}
			for i := range 1000 {
				blocks[fmt.Sprintf("%d,%d,%d", i%10, i/10%10, i/100)] = map[string]any{"c": "stone", "t": i % 7}
			}
			if err := alice.SetElements("grid", "blocks", blocks); err != nil {
				t.Fatal(err)
			}
			c := p.agent(t, ClientOptions{})
			waitFor(t, "the grid in the document", 10*time.Second, func() bool {
				doc, _, ok := c.Document()
				return ok && len(entities(t, doc)["grid"]["blocks"]) > 10_000
			})
			caughtUp(t, p, c)
			acked(t, p)
			for i, change := range []func() error{
				func() error {
					return alice.SetElements("grid", "blocks", map[string]map[string]any{"1,2,3": {"c": "gold"}})
				},
				func() error { return alice.RemoveElements("grid", "blocks", "4,4,4") },
				func() error {
					return alice.SetElements("grid", "blocks", map[string]map[string]any{"9,9,10": {"c": "glass"}})
				},
				func() error { return alice.Set("grid", map[string]any{"kind": "grid", "lit": true}) },
			} {
				before := p.bridge.Revision()
				if err := change(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "a new revision", 5*time.Second, func() bool { return p.bridge.Revision() != before })
				caughtUp(t, p, c)
				st := c.Stats()
				if st.Last == "set" || st.LastBytes > 400 {
					t.Fatalf("change %d reached the client as a %s of %d bytes", i, st.Last, st.LastBytes)
				}
				t.Logf("change %d: a %s of %d bytes", i, st.Last, st.LastBytes)
			}
			doc, _, _ := c.Document()
			var grid map[string]map[string]any
			if err := json.Unmarshal(entities(t, doc)["grid"]["blocks"], &grid); err != nil {
				t.Fatal(err)
			}
			o, _ := p.node.World().Get("grid")
			want, _ := o.Scopes.AppendJSON(nil, "blocks")
			got, _ := json.Marshal(grid)
			if !sameJSON(got, want) || len(grid) != 1000 || grid["1,2,3"]["c"] != "gold" || grid["4,4,4"] != nil {
				t.Fatalf("the client's grid differs from the node's (%d blocks)", len(grid))
			}
		})
	}
}
