package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
)

// godotPath finds Debian's headless Godot 3.
func godotPath(t testing.TB) string {
	return toolPath(t, "Godot 3", "godot3-server", "godot3-server", "godot3", "godot")
}

// TestGodotClient: a headless Godot 3 process with the addon
// (clients/godot) and a Go client see each other's objects appear, move
// and vanish, and Godot's whole world equals the node's when both stop.
func TestGodotClient(t *testing.T) {
	p := startProc(t, "--tick", "20ms")
	g := startGodot(t, "res://test/sync_test.gd", "SOLIPSISM_URL="+p.URL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")

	ident := g.expect(t, "CONNECTED ", 30*time.Second)
	if !strings.HasPrefix(ident, "godot-") {
		t.Fatalf("Godot's identifier %q", ident)
	}
	mine := g.expect(t, "MINE ", 10*time.Second)

	// Godot's cube moves: the Go client sees it at several places.
	seen := map[string]bool{}
	waitUntil(t, "the Go client to see Godot's cube move", 20*time.Second, func() bool {
		if o, ok := goc.World().Get(mine); ok {
			if o.Owner != ident {
				t.Fatalf("Godot's cube is owned by %s", o.Owner)
			}
			at, _ := o.Properties.Get("position")
			seen[string(at)] = true
		}
		return len(seen) >= 3
	})

	// The Go client's cube appears and moves to x = 5; Godot sees each
	// place, then stops and prints its world.
	cube, err := goc.Create(map[string]any{"kind": "go-cube", "position": []float64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if at := g.expect(t, "SAW-ADD "+cube, 10*time.Second); at != "[0,0,0]" {
		t.Fatalf("Godot saw the cube appear at %s", at)
	}
	for x := 1; x <= 5; x++ {
		time.Sleep(60 * time.Millisecond)
		if err := goc.Set(cube, map[string]any{"position": []float64{float64(x), 0.5, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	last := ""
	for last != "[5,0.5,0]" {
		last = g.expect(t, "SAW-MOVE "+cube, 10*time.Second)
	}
	view := g.expect(t, "WORLD ", 10*time.Second)

	// Godot's whole world against the node's (owners and properties).
	if d := viewDiff(t, view, worldOf(t, p), true); d != "" {
		t.Fatalf("%s; Godot printed:\n%s", d, g.printed())
	}

	// Godot removes its cube when told: it vanishes for the Go client and
	// the node.
	if err := goc.Set(cube, map[string]any{"cue": "remove yours"}); err != nil {
		t.Fatal(err)
	}
	if got := g.expect(t, "REMOVED ", 10*time.Second); got != mine {
		t.Fatalf("Godot removed %s, not %s", got, mine)
	}
	waitUntil(t, "Godot's cube to vanish", 10*time.Second, func() bool {
		_, ok := goc.World().Get(mine)
		return !ok
	})
	if _, ok := worldOf(t, p)[mine]; ok {
		t.Fatal("the node still holds Godot's cube")
	}

	// The Go cube goes: Godot sees it go, frees its node, and exits 0.
	if err := goc.Remove(cube); err != nil {
		t.Fatal(err)
	}
	g.expect(t, "GONE "+cube, 10*time.Second)
	g.expectExit(t)
}

// TestGodotKeepsObjectsOverABreak: Godot's link breaks and comes back 2 s
// later. The Go client's object that stays never leaves Godot's world (no
// vanishing and coming back in its scene); the one removed while the link
// was down goes once the new link's refresh answer has ended; then
// Godot's whole world equals the node's.
func TestGodotKeepsObjectsOverABreak(t *testing.T) {
	p := startProc(t, "--tick", "20ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	stays, err := goc.Create(map[string]any{"kind": "stays"})
	if err != nil {
		t.Fatal(err)
	}
	goes, err := goc.Create(map[string]any{"kind": "goes"})
	if err != nil {
		t.Fatal(err)
	}
	g := startGodot(t, "res://test/break_test.gd", "SOLIPSISM_URL="+p.URL())
	g.expect(t, "CONNECTED ", 30*time.Second)
	g.expect(t, "REFRESHED 1", 10*time.Second)
	for _, id := range []string{stays, goes} {
		if !strings.Contains(g.printed(), "ADDED "+id) {
			t.Fatalf("Godot did not see %s; it printed:\n%s", id, g.printed())
		}
	}

	if err := goc.Set(stays, map[string]any{"cue": "break"}); err != nil {
		t.Fatal(err)
	}
	g.expect(t, "BROKE", 10*time.Second)
	g.expect(t, "DOWN", 10*time.Second)
	// (Godot dials again 2 s after the link went.)
	if err := goc.Remove(goes); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the node to drop the removed object", time.Second, func() bool { _, ok := worldOf(t, p)[goes]; return !ok })
	g.expect(t, "CONNECTED ", 10*time.Second)
	if got := g.expect(t, "REMOVED ", 10*time.Second); got != goes {
		t.Fatalf("Godot removed %s; it printed:\n%s", got, g.printed())
	}
	g.expect(t, "REFRESHED 2", 10*time.Second)
	view := g.expect(t, "WORLD ", 10*time.Second)
	if strings.Contains(g.printed(), "REMOVED "+stays) {
		t.Fatalf("the object that stayed left Godot's world during the break; it printed:\n%s", g.printed())
	}
	if d := viewDiff(t, view, worldOf(t, p), true); d != "" {
		t.Fatalf("%s; Godot printed:\n%s", d, g.printed())
	}
}

// TestGodotFuzz: the addon's client and mirror take 20,000 messages of
// every shape (values of every JSON type where the protocol has one, valid
// messages with characters changed or cut) without a script error or an
// engine error of their making; the only errors are Godot's JSON parser
// reporting what it refused.
func TestGodotFuzz(t *testing.T) {
	g := startGodot(t, "res://test/fuzz_test.gd")
	g.expect(t, "FUZZ ", time.Minute)
	if err := <-g.done; err != nil {
		g.done <- err
		t.Fatalf("Godot: %v\n%s", err, g.printed())
	}
	g.done <- nil
	for _, l := range strings.Split(g.printed(), "\n") {
		if strings.Contains(l, "ERROR") && !strings.HasPrefix(l, "ERROR: parse: Error parsing JSON") && !strings.Contains(l, "locale") {
			t.Fatalf("%s; Godot printed:\n%s", l, g.printed())
		}
	}
}

// TestGodotExample runs the addon's example scene (clients/godot's main
// scene) headless: its player appears to a Go client as an "avatar3d"
// object of a godot- world, as the browser demo's avatars are, and goes
// when the Godot process is killed; also on a node that checks writes
// against the shipped demo schemas.
func TestGodotExample(t *testing.T) {
	for _, args := range [][]string{nil, {"--schemas", "../docs/demo-schemas.json"}} {
		t.Run(fmt.Sprint(args), func(t *testing.T) { godotExample(t, args...) })
	}
}

func godotExample(t *testing.T, args ...string) {
	p := startProc(t, append([]string{"--tick", "20ms", "--reclaim-grace", "0"}, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	cmd, _ := startExample(t, ctx, p.URL())
	var avatar string
	waitUntil(t, "the example's avatar", 30*time.Second, func() bool { avatar = godotAvatar(goc); return avatar != "" })
	o, _ := goc.World().Get(avatar)
	if at, _ := o.Properties.Get("position"); string(at) != "[0,1.6,0]" {
		t.Errorf("the avatar is at %s; want [0,1.6,0]", at)
	}
	cmd.Process.Kill()
	waitUntil(t, "the avatar to go", 10*time.Second, func() bool {
		_, ok := goc.World().Get(avatar)
		return !ok
	})
}

// TestGodotSurvivesNodeRestart: the node is killed and started again on
// the same address; the Godot example dials again by itself and its
// player is back for a Go client, which reconnected too.
func TestGodotSurvivesNodeRestart(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--tick", "20ms", "--reclaim-grace", "0"}
	p := startProc(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc, err := client.Dial(ctx, p.URL(), client.Options{Prefix: "gotest", Tick: 10 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer goc.Close()
	_, out := startExample(t, ctx, p.URL())
	avatar := func() string { return godotAvatar(goc) }
	waitUntil(t, "the example's avatar", 30*time.Second, func() bool { return avatar() != "" })
	before := avatar()

	p.Kill()
	waitUntil(t, "the Go client to see the node go", 10*time.Second, func() bool { return !goc.Connected() })
	p2 := startProc(t, append(args, "--listen", p.Addr)...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := worldOf(t, p2)[before]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted node lacks the avatar; Godot printed:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The Go client, back too, holds it as the node does.
	waitUntil(t, "the Go client to hold the node's world", 10*time.Second, func() bool {
		return goc.Connected() && differs(clientView(goc), worldOf(t, p2), goc.Identifier()) == ""
	})
}

// startExample runs the example scene headless against url; it is killed
// when the test ends.
func startExample(t *testing.T, ctx context.Context, url string) (*exec.Cmd, *strings.Builder) {
	cmd := exec.CommandContext(ctx, godotPath(t), "--path", "../clients/godot")
	cmd.Env = append(os.Environ(), "SOLIPSISM_URL="+url)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out
}

// godotAvatar returns the id of an example's avatar a Go client holds.
func godotAvatar(c *client.Client) string {
	for _, o := range c.World().Objects() {
		if kind, _ := o.Properties.Get("kind"); string(kind) == `"avatar3d"` && strings.HasPrefix(o.Owner, "godot-") {
			return o.ID
		}
	}
	return ""
}

// TestGodotRefused: on a node with the demo schemas, a write of the Godot
// addon's that breaks them reaches its app as the client's refused signal,
// with the node's reason, the object already put back to the node's
// values; the Go client never sees the bad value.
func TestGodotRefused(t *testing.T) {
	p := startProc(t, "--tick", "20ms", "--schemas", "../docs/demo-schemas.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	g := startGodot(t, "res://test/refused_test.gd", "SOLIPSISM_URL="+p.URL())
	mine := g.expect(t, "MINE ", 30*time.Second)
	if reason := g.expect(t, "REFUSED "+mine+" ", 30*time.Second); !strings.Contains(reason, "position") {
		t.Fatalf("refused with %q", reason)
	}
	if at := g.expect(t, "POSITION ", 10*time.Second); at != "[0,1.6,0]" {
		t.Fatalf("after the refusal Godot holds its avatar at %s", at)
	}
	if o, ok := goc.World().Get(mine); !ok || string(o.Properties.Value("position")) != "[0,1.6,0]" {
		t.Fatalf("the Go client sees %+v", o)
	}
	if reason := g.expect(t, "REFUSED grid ", 30*time.Second); !strings.Contains(reason, `element "2,2,2": at '/c'`) {
		t.Fatalf("the block refused with %q", reason)
	}
	if got := g.expect(t, "SCOPE grid blocks ", 10*time.Second); !sameScope(t, got, 1, `{"0,0,0":{"c":"#d94f4f"}}`) {
		t.Fatalf("after the refusal Godot holds %s", got)
	}
	if _, e := goScope(goc, "grid", "blocks"); e != `{"0,0,0":{"c":"#d94f4f"}}` {
		t.Fatalf("the Go client sees the grid as %s", e)
	}
}

// TestGodotScopes: the Godot addon takes a grid's blocks as element
// deltas (never the grid whole as a property), through bursts of changes
// and removals, and ends with the Go writer's copy, version included; it
// writes its own grid element by element (a removal and a set of one block
// in one tick included), which a Go client sees; its whole world equals
// the node's.
func TestGodotScopes(t *testing.T) {
	p := startProc(t, "--tick", "20ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	grid := makeGrid(t, goc)
	g := startGodot(t, "res://test/scopes_test.gd", "SOLIPSISM_URL="+p.URL())
	g.expect(t, "CONNECTED ", 30*time.Second)
	if got := g.expect(t, "ADDED "+grid+" ", 10*time.Second); strings.Contains(got, "blocks") {
		t.Fatalf("the grid came with its blocks as a property: %s", got)
	}
	writeBursts(t, goc, grid)
	g.expect(t, "WROTE", 10*time.Second)
	want := `{"0,0,0":{"t":"glass"},"1,0,0":{"c":"blue","t":"dirt"}}`
	waitUntil(t, "the Go client to see Godot's grid", 10*time.Second, func() bool {
		_, e := goScope(goc, "ggrid", "blocks")
		return reflect.DeepEqual(canonical(t, []byte(e)), canonical(t, []byte(want)))
	})
	if err := goc.Set(grid, map[string]any{"cue": "check"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{grid, "ggrid"} {
		got := g.expect(t, "SCOPE "+id+" blocks ", 10*time.Second)
		if v, e := goScope(goc, id, "blocks"); !sameScope(t, got, v, e) {
			t.Fatalf("%s: Godot holds %s, the Go client version %d %s", id, got, v, e)
		}
	}
	if d := viewDiff(t, g.expect(t, "WORLD ", 10*time.Second), worldOf(t, p), true); d != "" {
		t.Fatal(d)
	}
	if strings.Contains(g.printed(), "DISCONNECTED") {
		t.Fatalf("Godot's link went (a write the node refused as a bad message?):\n%s", g.printed())
	}
	if err := goc.Set(grid, map[string]any{"cue": "quit"}); err != nil {
		t.Fatal(err)
	}
	g.expectExit(t)
}

// TestGodotScopeGap: a node sends the Godot addon a scope delta built on a
// version it never got: the addon refuses it, asks for the object at once
// (protocol.md's vector: bucket 3423 of 4096), and the answer levels it;
// an object of that bucket the answer does not bring goes.
func TestGodotScopeGap(t *testing.T) {
	url, asked := startGapNode(t)
	g := startGodot(t, "res://test/scopes_test.gd", "SOLIPSISM_URL="+url)
	g.expect(t, "ADDED grid-1 ", 30*time.Second)
	select {
	case r := <-asked:
		if r != `{"buckets":[3423],"of":4096}` && r != `{"of":4096,"buckets":[3423]}` {
			t.Errorf("asked for %s, want bucket 3423 of 4096", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Godot did not ask for the object after the gap:\n%s", g.printed())
	}
	g.expect(t, "REMOVED extra-2054", 10*time.Second)
	if got := g.expect(t, "SCOPE grid-1 blocks ", 10*time.Second); !sameScope(t, got, 3, `{"a":{"c":1},"b":{"c":2}}`) {
		t.Fatalf("after the repair Godot holds %s", got)
	}
}
