package alloverse

import (
	"context"
	"testing"
	"time"
)

// TestAgentTakesAndReleases: an Alloverse agent takes an entity a
// Solipsism client marked transferable, changes it, and the client's own
// writes are refused; an unmarked entity is refused; the agent releases
// the entity to the node and the client takes it back.
func TestAgentTakesAndReleases(t *testing.T) {
	p := startPlace(t, Options{})
	sol := p.solipsist(t, "sol")
	ball, _ := sol.Create(map[string]any{"kind": "ball", "transferable": true})
	rock, _ := sol.Create(map[string]any{"kind": "rock"})
	c := p.agent(t, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, agent, err := c.Announce(ctx, map[string]any{"geometry": "avatar"})
	if err != nil {
		t.Fatal(err)
	}
	caughtUp(t, p, c)
	owner := func(id string) string { o, _ := p.node.World().Get(id); return o.Owner }

	if r, err := c.Request(ctx, "take_ownership", ball); err != nil || responseError(r) != nil {
		t.Fatalf("take the ball: %s %v", r, err)
	}
	if owner(ball) != agent {
		t.Fatalf("the ball is %s's, want the agent %s's", owner(ball), agent)
	}
	if r, err := c.Request(ctx, "change_components", ball, "add_or_change", map[string]any{"color": "green"}); err != nil || responseError(r) != nil {
		t.Fatalf("the new owner's change: %s %v", r, err)
	}
	waitFor(t, "the client sees the agent's change and owner", 5*time.Second, func() bool {
		o, _ := sol.World().Get(ball)
		return o.Owner == agent && string(o.Properties.Value("color")) == `"green"`
	})
	if err := sol.Set(ball, map[string]any{"color": "red"}); err == nil {
		t.Fatal("the old owner wrote the ball")
	}
	if r, err := c.Request(ctx, "take_ownership", rock); err != nil || responseError(r) == nil {
		t.Fatalf("take the rock: %s %v, want an error", r, err)
	}
	if r, err := c.Request(ctx, "release_ownership", ball); err != nil || responseError(r) != nil {
		t.Fatalf("release: %s %v", r, err)
	}
	if owner(ball) != p.node.Identifier() {
		t.Fatalf("released ball is %s's", owner(ball))
	}
	waitFor(t, "the client sees the release", 5*time.Second, func() bool {
		o, _ := sol.World().Get(ball)
		return o.Owner == p.node.Identifier()
	})
	if err := sol.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Request(ctx, "change_components", ball, "add_or_change", map[string]any{"color": "blue"}); err != nil || responseError(r) == nil {
		t.Fatalf("the agent changed the ball it gave up: %s %v", r, err)
	}
	caughtUp(t, p, c)
}
