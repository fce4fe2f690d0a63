package alloverse

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/solipsism/mesh/enet"
)

// startENet serves the place's bridge on an ENet host on 127.0.0.1.
func startENet(t *testing.T, p *place) string {
	t.Helper()
	h, err := enet.Listen("127.0.0.1:0", enet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	go p.bridge.ServeENet(h)
	t.Cleanup(func() { h.Close() })
	return h.Addr().String()
}

// TestENetAgent: an Alloverse agent over ENet announces, follows the
// world through a set then merge diffs (never apply), acknowledges on the
// state channel, syncs its clock, spawns and changes an entity that a
// Solipsism client sees, and is cleaned up when it leaves or goes silent.
func TestENetAgent(t *testing.T) {
	p := startPlace(t, Options{})
	addr := startENet(t, p)
	alice := p.solipsist(t, "alice")
	ball, _ := alice.Create(map[string]any{"kind": "ball", "x": 0})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialENetClient(ctx, addr, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	avatar, agent, err := c.Announce(ctx, map[string]any{"geometry": "avatar"})
	if err != nil {
		t.Fatal(err)
	}
	caughtUp(t, p, c)
	acked(t, p)
	for i := 1; i <= 5; i++ {
		alice.Set(ball, map[string]any{"x": i})
		before := p.bridge.Revision()
		waitFor(t, "a new revision", 5*time.Second, func() bool { return p.bridge.Revision() != before })
		caughtUp(t, p, c)
	}
	// A change merge cannot express: a set, never apply.
	alice.Set(ball, map[string]any{"meta": map[string]any{"a": nil}})
	waitFor(t, "the null member", 5*time.Second, func() bool {
		doc, _, _ := c.Document()
		return string(entities(t, doc)[ball]["meta"]) == `{"a":null}`
	})
	caughtUp(t, p, c)
	if st := c.Stats(); st.Applies != 0 || st.Merges < 5 || st.Sets < 2 || st.Failed != 0 {
		t.Fatalf("stats %+v: want merges and sets only", st)
	}
	ct, st, err := c.ClockSync(ctx)
	if err != nil || ct == 0 || st <= 0 {
		t.Fatalf("clock: %v %v %v", ct, st, err)
	}

	r, err := c.Request(ctx, "spawn_entity", map[string]any{"geometry": "cube"})
	if err != nil || responseError(r) != nil {
		t.Fatalf("spawn: %s %v", r, err)
	}
	var cube string
	json.Unmarshal(r[1], &cube)
	if r, err := c.Request(ctx, "change_components", cube, "add_or_change", map[string]any{"color": "green"}); err != nil || responseError(r) != nil {
		t.Fatalf("change: %s %v", r, err)
	}
	waitFor(t, "alice to see the agent's green cube", 5*time.Second, func() bool {
		o, ok := alice.World().Get(cube)
		return ok && o.Owner == agent && string(o.Properties["color"]) == `"green"`
	})
	if _, ok := alice.World().Get(avatar); !ok {
		t.Fatal("alice does not see the avatar")
	}
	c.Close()
	waitFor(t, "the agent's entities to go when it disconnects", 5*time.Second, func() bool {
		_, a := alice.World().Get(avatar)
		_, b := alice.World().Get(cube)
		return !a && !b
	})

	// A client that goes silent (its socket closes, no goodbye) times out.
	silent, err := DialENetClient(ctx, addr, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ghost, _, err := silent.Announce(ctx, map[string]any{"geometry": "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alice to see the silent agent", 5*time.Second, func() bool { _, ok := alice.World().Get(ghost); return ok })
	silent.t.(*enetTransport).p.Host().CloseSocket()
	waitFor(t, "the silent agent's avatar to go", 40*time.Second, func() bool { _, ok := alice.World().Get(ghost); return !ok })
}
