package test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestEngineClientsFollowDrain: a mesh of two node processes; the C#
// WorldClient and the Godot addon, each knowing member A alone, own a box
// there; a Go client on member B watches. A gets SIGTERM and drains: both
// engine clients are sent to B and link up there at once, their boxes
// never vanish for the watcher, and their next writes reach it; A exits.
func TestEngineClientsFollowDrain(t *testing.T) {
	secret := strings.Repeat("cd", 32)
	common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "drain", "--mesh-profile", "local", "--tick", "20ms"}
	a := startProc(t, common...)
	b := startProc(t, append([]string{"--join", meshAddr(t, a)}, common...)...)
	waitMesh(t, []*proc{a, b})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, b.URL(), "gotest")
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", a.URL())
	cs.expect(t, "LINKUP", 30*time.Second)
	cs.send(t, `CREATE cbox {"kind":"box","n":1}`)
	g := startGodot(t, "res://test/drain_test.gd", "SOLIPSISM_URL="+a.URL())
	if at := g.expect(t, "CONNECTED ", 30*time.Second); at != a.URL() {
		t.Fatalf("Godot linked to %s", at)
	}
	waitUntil(t, "the watcher on B to see both boxes", 20*time.Second, func() bool {
		_, c := goc.World().Get("cbox")
		_, g := goc.World().Get("gbox")
		return c && g
	})
	cue, err := goc.Create(map[string]any{"cue": "wait"})
	if err != nil {
		t.Fatal(err)
	}
	stopWatch := wiretest.WatchGone([]string{"cbox", "gbox"}, func(id string) bool { _, ok := goc.World().Get(id); return ok })
	a.Stop(t)
	cs.expect(t, "LINKUP", 10*time.Second)
	cs.send(t, "WHERE")
	if at := cs.expect(t, "AT ", 10*time.Second); at != b.URL() {
		t.Errorf("C# linked up again at %s, want B %s", at, b.URL())
	}
	if at := g.expect(t, "CONNECTED ", 10*time.Second); at != b.URL() {
		t.Errorf("Godot linked up again at %s, want B %s", at, b.URL())
	}
	cs.send(t, `SET cbox {"n":2}`)
	if err := goc.Set(cue, map[string]any{"cue": "move"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both boxes' writes after the move", 10*time.Second, func() bool {
		c, _ := goc.World().Get("cbox")
		g, _ := goc.World().Get("gbox")
		return string(c.Properties.Value("n")) == "2" && string(g.Properties.Value("n")) == "2"
	})
	if gone := stopWatch(); len(gone) > 0 {
		t.Errorf("%v vanished for the watcher on B while their clients moved", gone)
	}
	if !strings.Contains(a.Log(), "drained: every client left") {
		t.Errorf("A's log does not say its clients left:\n%s", a.Log())
	}
	goc.Set(cue, map[string]any{"cue": "quit"}) //nolint:errcheck // Godot exits, or the cleanup stops it
}
