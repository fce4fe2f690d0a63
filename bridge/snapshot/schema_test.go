package snapshot

import (
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/schema"
)

// TestSchemaRefusals: a snapshot client's write that breaks the node's
// property schemas changes nothing, and the client is sent back what the
// node holds.
func TestSchemaRefusals(t *testing.T) {
	set, err := schema.Parse([]byte(`{"default":{"type":"object","properties":{"position":{"type":"array","items":{"type":"number","minimum":-100,"maximum":100}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := startPlaceWith(t, Options{}, relay.Options{Tick: 5 * time.Millisecond, Validator: set})
	sol := p.solipsist(t)
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	c.Set("udp-ball", map[string]any{"ghostType": "transform", "position": []float64{1, 2, 3}, "rotation": []float64{0, 0, 0, 1}})
	waitFor(t, "the ball", 5*time.Second, func() bool {
		o, ok := sol.World().Get("udp-ball")
		return ok && string(o.Properties.Value("position")) == "[1,2,3]"
	})
	c.Set("udp-ball", map[string]any{"ghostType": "transform", "position": []float64{500, 2, 3}, "rotation": []float64{0, 0, 0, 1}})
	c.Set("udp-crate", map[string]any{"ghostType": "transform", "position": []float64{-500, 0, 0}, "rotation": []float64{0, 0, 0, 1}})
	time.Sleep(300 * time.Millisecond)
	if o, _ := p.node.World().Get("udp-ball"); string(o.Properties.Value("position")) != "[1,2,3]" {
		t.Errorf("the node took position %s", o.Properties.Value("position"))
	}
	if _, ok := p.node.World().Get("udp-crate"); ok {
		t.Error("the node took a crate out of bounds")
	}
	c.Set("udp-ball", map[string]any{"ghostType": "transform", "position": []float64{4, 5, 6}, "rotation": []float64{0, 0, 0, 1}})
	waitFor(t, "a valid move", 5*time.Second, func() bool {
		o, _ := sol.World().Get("udp-ball")
		return string(o.Properties.Value("position")) == "[4,5,6]"
	})
}

// TestSchemaRefusesBlocks: with the demo's schemas, a snapshot client's
// block whose colour is markup is refused (its whole delta: the good
// block with it), and its next good block is taken.
func TestSchemaRefusesBlocks(t *testing.T) {
	set, err := schema.Load("../../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	p := startPlaceWith(t, Options{}, relay.Options{Tick: 5 * time.Millisecond, Validator: set})
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	c.Set("udp-grid", map[string]any{"kind": "grid", "position": []float64{0, 0, 0}})
	c.SetElements("udp-grid", "blocks", map[string]map[string]any{"0,0,0": {"c": "#d94f4f"}}) //nolint:errcheck // plain values
	blocks := func() string {
		o, _ := p.node.World().Get("udp-grid")
		b, _ := o.Scopes.AppendJSON(nil, "blocks")
		return string(b)
	}
	waitFor(t, "the first block", 5*time.Second, func() bool { return blocks() == `{"0,0,0":{"c":"#d94f4f"}}` })
	c.SetElements("udp-grid", "blocks", map[string]map[string]any{"1,1,1": {"c": "#5fd38d"}, "2,2,2": {"c": `red"><script>`}}) //nolint:errcheck // plain values
	time.Sleep(300 * time.Millisecond)
	if got := blocks(); got != `{"0,0,0":{"c":"#d94f4f"}}` {
		t.Fatalf("the node took a delta with a block of markup: %s", got)
	}
	c.SetElements("udp-grid", "blocks", map[string]map[string]any{"3,3,3": {"c": "#4f8fd9"}}) //nolint:errcheck // plain values
	waitFor(t, "the next good block", 5*time.Second, func() bool { return blocks() == `{"0,0,0":{"c":"#d94f4f"},"3,3,3":{"c":"#4f8fd9"}}` })
}
