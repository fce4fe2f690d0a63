package snapshot

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestElementsWrite: a snapshot client builds a grid of its own and
// writes its blocks, through 20% loss, duplicates and reordering: 400
// blocks at once (several commands' worth), then changes, removals and a
// block removed and set again before any was acknowledged. The node, a
// WebSocket client and the writer's own ghost all end with the same
// blocks. Its writes to another world's grid are refused and change
// nothing.
func TestElementsWrite(t *testing.T) {
	p := startPlace(t, Options{})
	sol := p.solipsist(t)
	lossy := startLossy(t, p.srv.Addr(), 5)
	c := dial(t, lossy.Addr(), ClientOptions{})
	if err := c.Set("udp-grid", map[string]any{"kind": "grid"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{}
	for i := range 400 {
		want[fmt.Sprintf("%d,%d,0", i%20, i/20)] = map[string]any{"t": "stone", "n": i}
	}
	if err := c.SetElements("udp-grid", "blocks", want); err != nil {
		t.Fatal(err)
	}
	for r := range 20 {
		id := fmt.Sprintf("%d,0,0", r)
		c.SetElements("udp-grid", "blocks", map[string]map[string]any{id: {"c": r}}) //nolint:errcheck // plain values
		want[id]["c"] = r
		gone := fmt.Sprintf("%d,19,0", r)
		c.RemoveElements("udp-grid", "blocks", gone)
		delete(want, gone)
		if r%5 == 0 {
			// Removed and set again: the set's fields alone.
			again := fmt.Sprintf("%d,1,0", r)
			c.RemoveElements("udp-grid", "blocks", again)
			c.SetElements("udp-grid", "blocks", map[string]map[string]any{again: {"t": "glass"}}) //nolint:errcheck // plain values
			want[again] = map[string]any{"t": "glass"}
		}
		time.Sleep(time.Duration(r%3) * 10 * time.Millisecond)
	}
	wantJSON := func() []byte {
		b, _ := jsonOf(want)
		return b
	}()
	waitFor(t, "the WebSocket client to see the blocks", 30*time.Second, func() bool {
		o, ok := sol.World().Get("udp-grid")
		if !ok {
			return false
		}
		b, _ := o.Scopes.AppendJSON(nil, "blocks")
		return sameJSON(b, wantJSON)
	})
	waitFor(t, "the writer's own ghost to hold them", 30*time.Second, func() bool { return sameElements(wantJSON, c.Elements("udp-grid", "blocks")) })
	o, _ := p.node.World().Get("udp-grid")
	if b, _ := o.Scopes.AppendJSON(nil, "blocks"); !sameJSON(b, wantJSON) {
		t.Fatalf("the node holds %s", b)
	}

	// Another world's grid: refused.
	if err := sol.CreateWithID("sol-grid", map[string]any{"kind": "grid"}); err != nil {
		t.Fatal(err)
	}
	if err := sol.SetElements("sol-grid", "blocks", map[string]map[string]any{"0,0,0": {"t": "dirt"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the WebSocket client's grid", 10*time.Second, func() bool { return c.Elements("sol-grid", "blocks")["0,0,0"] != nil })
	c.SetElements("sol-grid", "blocks", map[string]map[string]any{"0,0,0": {"t": "gold"}, "9,9,9": {"t": "gold"}}) //nolint:errcheck // plain values
	c.RemoveElements("sol-grid", "blocks", "0,0,0")
	time.Sleep(500 * time.Millisecond)
	o, _ = p.node.World().Get("sol-grid")
	if b, _ := o.Scopes.AppendJSON(nil, "blocks"); string(b) != `{"0,0,0":{"t":"dirt"}}` {
		t.Fatalf("a write to another's grid changed it: %s", b)
	}
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
