package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/schema"
	"github.com/solipsism/mesh/store"
)

// TestBrowserVoxelBuilder: two pages build one grid together (one in a
// WebWorker, one on the page, one placing a block with a real mouse
// click); each renders the other's blocks, colours and removals, one box
// per block; the grid persists across a restart of its node.
func TestBrowserVoxelBuilder(t *testing.T) {
	browser := newBrowser(t)
	set, err := schema.Load("../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	v := &countingValidator{set: set}
	dir := t.TempDir()
	st, err := store.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	node, front, mux := startWebNode(t, relay.Options{Validator: v, Store: st})
	mux.Handle("/api/state", api.StateHandler(node))
	defer func() {
		if n, first := v.refusals(); n > 0 {
			t.Errorf("the builder's writes broke the demo's schemas %d times; first: %v", n, first)
		}
	}()
	alice, aliceOutside := tabWithin(t, browser, "alice", front.URL+"/voxel", front.URL)
	bob, bobOutside := tabWithin(t, browser, "bob", front.URL+"/voxel?mode=main", front.URL)
	defer noneOutside(t, map[string]func() []string{"alice": aliceOutside, "bob": bobOutside})
	waitJS(t, alice, "alice connected in a worker", `window.voxel && voxel.session.status === "connected" && voxel.mode === "worker"`)
	waitJS(t, bob, "bob connected on the page", `window.voxel && voxel.session.status === "connected" && voxel.mode === "main"`)
	waitJS(t, alice, "the grid", `!!voxel.grid()`)
	waitJS(t, bob, "the grid", `!!voxel.grid()`)

	same := func(what, want string) {
		t.Helper()
		for _, p := range []context.Context{alice, bob} {
			waitJS(t, p, what, `JSON.stringify(voxel.boxes()) === JSON.stringify(`+want+`)`)
		}
	}
	waitJS(t, alice, "alice places three blocks", `(async () => (await voxel.place(0, 0, 0, "#d94f4f")) && (await voxel.place(1, 0, 0, "#4f8fd9")) && voxel.place(1, 1, 0, "#5fd38d"))()`)
	same("both render alice's blocks", `["0,0,0","1,0,0","1,1,0"]`)
	waitJS(t, bob, "bob sees their colours", `voxel.colorOf("1,0,0") === "#4f8fd9" && voxel.colorOf("1,1,0") === "#5fd38d"`)
	waitJS(t, bob, "bob recolours one, removes one and adds one", `(async () => (await voxel.place(1, 0, 0, "#f2c14e")) && (await voxel.erase(0, 0, 0)) && voxel.place(5, 0, 5, "#9b6bd9"))()`)
	same("both render bob's changes", `["1,0,0","1,1,0","5,0,5"]`)
	waitJS(t, alice, "alice sees the new colour", `voxel.colorOf("1,0,0") === "#f2c14e" && voxel.colorOf("5,0,5") === "#9b6bd9"`)

	// A real click on the floor, low in bob's view, places a block there.
	if _, err := chromedp.Call(bob, page.BringToFront, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	at := evalJS[[]float64](t, bob, `[innerWidth / 2, innerHeight * 0.85]`)
	if err := chromedp.Do(bob, chromedp.MouseClickXY(at[0], at[1])); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bob, "the click placed a block", `voxel.boxes().length === 4`)
	clicked := evalJS[string](t, bob, `JSON.stringify(voxel.boxes())`)
	same("alice renders the clicked block", clicked)
	if n := evalJS[int](t, alice, `document.querySelectorAll("#grid a-box").length`); n != 4 {
		t.Fatalf("alice draws %d boxes for 4 blocks", n)
	}

	// The inspector shows the grid's scope: its size, not its blocks.
	insp, _ := tab(t, browser, "inspector", front.URL+"/inspect")
	waitJS(t, insp, "the inspector shows the scope", `[...document.querySelectorAll("#objects small.scope")].some(e => e.textContent.includes("blocks: 4 elements"))`)

	// Everyone leaves; the node restarts on its data; the grid is back.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := evalJS[string](t, alice, `JSON.stringify([...voxel.grid().elements("blocks")].sort())`)
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	front.Close()
	st.Close()
	st2, err := store.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	_, front2, _ := startWebNode(t, relay.Options{Validator: v, Store: st2})
	carol, carolOutside := tabWithin(t, browser, "carol", front2.URL+"/voxel", front2.URL)
	defer noneOutside(t, map[string]func() []string{"carol": carolOutside})
	waitJS(t, carol, "carol renders the grid as it was", fmt.Sprintf(`window.voxel && voxel.grid() && JSON.stringify([...voxel.grid().elements("blocks")].sort()) === %q && voxel.boxes().length === 4`, want))
}
