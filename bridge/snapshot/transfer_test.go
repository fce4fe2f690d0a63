package snapshot

import (
	"context"
	"testing"
	"time"
)

// TestTakeAndRelease: a UDP client takes an object a Solipsism client
// marked transferable, moves it (its set in the same command as the take
// goes after it), and the old owner's writes are refused; an unmarked
// object is refused; the client releases the object to the node.
func TestTakeAndRelease(t *testing.T) {
	p := startPlace(t, Options{})
	sol := p.solipsist(t)
	ball, _ := sol.Create(map[string]any{"kind": "ball", "transferable": true, "x": 0})
	rock, _ := sol.Create(map[string]any{"kind": "rock"})
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	waitFor(t, "the UDP client sees both", 5*time.Second, func() bool { return !c.Objects()[ball].IsZero() && !c.Objects()[rock].IsZero() })

	c.TakeOwnership(ball)
	c.Set(ball, map[string]any{"kind": "ball", "transferable": true, "x": 7})
	owner := func(id string) string { o, _ := p.node.World().Get(id); return o.Owner }
	waitFor(t, "the take and the move", 5*time.Second, func() bool {
		o, _ := sol.World().Get(ball)
		return o.Owner == c.Identifier() && string(o.Properties.Value("x")) == "7"
	})
	if err := sol.Set(ball, map[string]any{"x": 1}); err == nil {
		t.Fatal("the old owner wrote the ball")
	}
	c.TakeOwnership(rock)
	c.Set(rock, map[string]any{"kind": "gold"})
	time.Sleep(200 * time.Millisecond)
	if o, _ := p.node.World().Get(rock); o.Owner != sol.Identifier() || string(o.Properties.Value("kind")) != `"rock"` {
		t.Fatalf("the rock was taken: %+v", o)
	}
	c.Release(ball)
	waitFor(t, "the release", 5*time.Second, func() bool { return owner(ball) == p.node.Identifier() })
	// Repeats of the release (until acknowledged) and of the earlier take
	// are carried out once: the node keeps the ball.
	time.Sleep(200 * time.Millisecond)
	if owner(ball) != p.node.Identifier() {
		t.Fatalf("the ball went to %s after the release", owner(ball))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sol.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
}
