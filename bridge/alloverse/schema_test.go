package alloverse

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/schema"
)

// TestSchemaRefusals: an agent's write that breaks the node's property
// schemas is refused with the reason in the interaction's answer, and
// changes nothing.
func TestSchemaRefusals(t *testing.T) {
	set, err := schema.Parse([]byte(`{"kinds":{"box":{"type":"object","properties":{"color":{"type":"string","pattern":"^[a-z]+$"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := startPlaceWith(t, Options{PlaceName: "testplace"}, relay.Options{Tick: 5 * time.Millisecond, Validator: set})
	c := p.agent(t, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := c.Announce(ctx, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Request(ctx, "spawn_entity", map[string]any{"kind": "box", "color": "red"})
	var box string
	if err != nil || responseError(r) != nil || json.Unmarshal(r[1], &box) != nil {
		t.Fatalf("spawn: %s %v", r, err)
	}
	r, err = c.Request(ctx, "change_components", box, "add_or_change", map[string]any{"color": 5})
	if err != nil {
		t.Fatal(err)
	}
	if e := responseError(r); e == nil || !strings.Contains(e.Error(), "/color") {
		t.Fatalf("a colour of 5: answered %s (%v), want the schema's reason", r, e)
	}
	if o, _ := p.node.World().Get(box); string(o.Properties.Value("color")) != `"red"` {
		t.Errorf("the node holds colour %s", o.Properties.Value("color"))
	}
	r, _ = c.Request(ctx, "spawn_entity", map[string]any{"kind": "box", "color": "RED!"})
	if responseError(r) == nil {
		t.Errorf("a bad box was spawned: %s", r)
	}
}

// TestSchemaRefusesBlocks: with the demo's schemas, an agent that owns a
// grid writes its blocks; blocks whose colour is markup are refused with
// the schema's reason, and the grid keeps what the node held.
func TestSchemaRefusesBlocks(t *testing.T) {
	set, err := schema.Load("../../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	p := startPlaceWith(t, Options{}, relay.Options{Tick: 5 * time.Millisecond, Validator: set})
	sol := p.solipsist(t, "sol")
	if err := sol.CreateWithID("grid", map[string]any{"kind": "grid", "position": []float64{0, 0, 0}, "transferable": true}); err != nil {
		t.Fatal(err)
	}
	if err := sol.SetElements("grid", "blocks", map[string]map[string]any{"0,0,0": {"c": "#d94f4f"}}); err != nil {
		t.Fatal(err)
	}
	c := p.agent(t, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := c.Announce(ctx, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the grid's block at the node", 5*time.Second, func() bool { o, _ := p.node.World().Get("grid"); return o.Scopes.Len("blocks") == 1 })
	if r, err := c.Request(ctx, "take_ownership", "grid"); err != nil || responseError(r) != nil {
		t.Fatalf("take the grid: %s %v", r, err)
	}
	r, err := c.Request(ctx, "change_components", "grid", "add_or_change", map[string]any{"blocks": map[string]any{"0,0,0": map[string]any{"c": "#d94f4f"}, "1,1,1": map[string]any{"c": `red"><script>`}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := responseError(r); e == nil || !strings.Contains(e.Error(), `1,1,1`) || !strings.Contains(e.Error(), `at '/c'`) {
		t.Fatalf("a block of markup: answered %s (%v), want the schema's reason", r, e)
	}
	if o, _ := p.node.World().Get("grid"); o.Scopes.Len("blocks") != 1 {
		b, _ := o.Scopes.AppendJSON(nil, "blocks")
		t.Errorf("the node's grid holds %s", b)
	}
}
