package test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/schema"
)

// TestShippedPagesUnderDemoSchemas: every browser page the node serves —
// the 2D map, the 3D demo, the voxel builder (placing, recolouring and
// removing a block), the networked-aframe example (spawning its box) and
// the inspector — runs on one node with docs/demo-schemas.json, with the
// README's Go client, and not one of their writes is refused; each one's
// objects are at the node.
// (The Godot example, the C# README's programs and the 3D demo's voice and
// hands run under the same schemas in TestGodotExample, TestCSharpRefused
// and TestBrowserDemoVoiceAndHands.)
func TestShippedPagesUnderDemoSchemas(t *testing.T) {
	browser := newBrowser(t)
	set, err := schema.Load("../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	v := &countingValidator{set: set}
	node, front, _ := startWebNode(t, relay.Options{Validator: v})
	defer func() {
		if n, first := v.refusals(); n > 0 {
			t.Errorf("the shipped pages' writes broke the demo's schemas %d times; first: %v", n, first)
		}
	}()
	pages := map[string]func() []string{}
	open := func(name, path string) {
		ctx, outside := tabWithin(t, browser, name, front.URL+path, front.URL)
		pages[name] = outside
		switch name {
		case "map", "3d":
			waitJS(t, ctx, name+" connected", `window.demo && demo.session.status === "connected"`)
		case "voxel":
			waitJS(t, ctx, "the voxel builder's grid", `window.voxel && voxel.session.status === "connected" && !!voxel.grid()`)
			waitJS(t, ctx, "a block placed, recoloured and removed, and one kept", `(async () => (await voxel.place(0, 0, 0, "#d94f4f")) && (await voxel.place(0, 0, 0, "#4f8fd9")) && (await voxel.place(2, 0, 1, "#5fd38d")) && voxel.erase(0, 0, 0))()`)
			waitJS(t, ctx, "the block kept", `JSON.stringify(voxel.boxes()) === '["2,0,1"]'`)
		case "naf":
			waitJS(t, ctx, "the networked-aframe page connected", `window.NAF && NAF.clientId && NAF.connection.isConnected()`)
		case "inspector":
			waitJS(t, ctx, "the inspector's table", `document.body.innerText.length > 0`)
		}
	}
	for _, p := range []struct{ name, path string }{
		{"map", "/2d?name=ada"}, {"3d", "/?name=bob"}, {"voxel", "/voxel"}, {"naf", "/naf.html"}, {"inspector", "/inspect"},
	} {
		open(p.name, p.path)
	}
	defer noneOutside(t, pages)
	// The README's Go client: a bot that moves.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bot := dialNode(t, ctx, "ws"+strings.TrimPrefix(front.URL, "http")+"/ws", "bot")
	id, err := bot.Create(map[string]any{"kind": "bot", "position": []float64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	for x := 0.1; x < 1; x += 0.1 {
		if err := bot.Set(id, map[string]any{"position": []float64{x, 0, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	kinds := func() map[string]int {
		out := map[string]int{}
		node.World().Range(func(o gameworld.Object) bool {
			var k string
			json.Unmarshal(o.Properties.Value("kind"), &k) //nolint:errcheck // "" for none
			out[k]++
			return true
		})
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		k := kinds()
		if k["avatar"] >= 1 && k["avatar3d"] >= 1 && k["grid"] >= 1 && k["ball"] >= 1 && k[""] >= 1 && k["bot"] == 1 {
			t.Logf("objects at the node by kind: %v", k)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pages' objects at the node by kind: %v (want an avatar, a 3D avatar, a grid, a ball, networked-aframe's entities and the bot)", k)
		}
		time.Sleep(50 * time.Millisecond)
	}
	node.World().Range(func(o gameworld.Object) bool {
		if string(o.Properties.Value("kind")) == `"grid"` {
			if b, _ := o.Scopes.AppendJSON(nil, "blocks"); string(b) != `{"2,0,1":{"c":"#5fd38d"}}` {
				t.Errorf("the node's grid holds %s", b)
			}
		}
		return true
	})
}
