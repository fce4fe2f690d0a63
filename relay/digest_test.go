package relay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
)

// TestAntiEntropyRepairs: divergence is made on purpose, by changing a
// world behind its node's back, on either side of a link; the digests find
// it and the repairs undo it, counted by kind, touching only what differed.
func TestAntiEntropyRepairs(t *testing.T) {
	s, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	repairsAllowed[s] = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := dialTick(t, ctx, url, 5*time.Millisecond), dialTick(t, ctx, url, 5*time.Millisecond)
	x, _ := a.Create(map[string]any{"n": 1})
	z, _ := b.Create(map[string]any{"n": 2})
	has := func(c *client.Client, id, prop, want string) func() bool {
		return func() bool {
			o, ok := c.World().Get(id)
			if want == "" {
				return !ok
			}
			return ok && string(o.Properties.Value(prop)) == want
		}
	}
	waitFor(t, "b sees x", 5*time.Second, has(b, x, "n", "1"))
	waitFor(t, "a sees z", 5*time.Second, has(a, z, "n", "2"))
	time.Sleep(3 * testDigestInterval) // handshakes and refresh answers done
	behindItsBack := func(w *gameworld.World, c gameworld.Change) {
		t.Helper()
		if res := w.Apply([]gameworld.Change{c}, nil); len(res.Records) != 1 {
			t.Fatalf("could not change the world: %+v", res)
		}
	}
	repairs := func(n *relay.Node, kind string) uint64 { return n.Repairs()[kind] }
	bn := b.Node()

	// b loses x: missing.
	behindItsBack(b.World(), gameworld.Change{Type: gameworld.Remove, ID: x})
	waitFor(t, "x back at b", 10*time.Second, has(b, x, "n", "1"))
	if got := repairs(bn, relay.RepairMissing); got != 1 {
		t.Fatalf("b repaired %d missing objects, want 1", got)
	}
	// b's copy of x differs: stale.
	behindItsBack(b.World(), gameworld.Change{Type: gameworld.Update, ID: x, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage("7")})})
	waitFor(t, "x right at b", 10*time.Second, has(b, x, "n", "1"))
	if got := repairs(bn, relay.RepairStale); got != 1 {
		t.Fatalf("b repaired %d stale objects, want 1", got)
	}
	// b holds an object of a's that a never had: extra.
	behindItsBack(b.World(), gameworld.Change{Type: gameworld.Add, ID: "ghost-00000000", Owner: a.Identifier(), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage("0")})})
	waitFor(t, "the ghost gone from b", 10*time.Second, has(b, "ghost-00000000", "", ""))
	if got := repairs(bn, relay.RepairExtra); got != 1 {
		t.Fatalf("b repaired %d extra objects, want 1", got)
	}
	// The node loses b's object: b's digest finds it, b sends it again, and
	// a sees it again too.
	behindItsBack(s.World(), gameworld.Change{Type: gameworld.Remove, ID: z})
	waitFor(t, "z back at the node", 10*time.Second, func() bool { _, ok := s.World().Get(z); return ok })
	if got := repairs(s, relay.RepairMissing); got != 1 {
		t.Fatalf("the node repaired %d missing objects, want 1", got)
	}
	waitFor(t, "z back at a", 10*time.Second, has(a, z, "n", "2"))
	// Nothing else was repaired, and nothing after. While the node lacked
	// z, a held it: a may have dropped it (and got it back as the node routed it anew).
	time.Sleep(5 * testDigestInterval)
	aExtra := repairs(a.Node(), relay.RepairExtra)
	if aExtra > 1 {
		t.Errorf("a dropped %d objects, want at most z", aExtra)
	}
	for _, c := range []struct {
		n    *relay.Node
		want map[string]uint64
	}{
		{a.Node(), map[string]uint64{relay.RepairMissing: 0, relay.RepairStale: 0, relay.RepairExtra: aExtra}},
		{bn, map[string]uint64{relay.RepairMissing: 1, relay.RepairStale: 1, relay.RepairExtra: 1}},
		{s, map[string]uint64{relay.RepairMissing: 1, relay.RepairStale: 0, relay.RepairExtra: 0}},
	} {
		if got := c.n.Repairs(); !equalCounts(got, c.want) {
			t.Errorf("%s repaired %v, want %v", c.n.Identifier(), got, c.want)
		}
	}
}

// dialTick connects a Go client with the given tick and the test digest
// interval, closed at the end of the test.
func dialTick(t testing.TB, ctx context.Context, url string, tick time.Duration) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, url, client.Options{Tick: tick, DigestInterval: testDigestInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func equalCounts(a, b map[string]uint64) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// TestRepairCountsOnlyWhatItRepairs: objects created while a repair is
// asked for (sent before the node had the request, in a bucket under
// repair) are live changes, not repairs. b loses one object behind its
// back, round after round, while a creates and removes objects as fast as
// it can (a world of a few objects: one bucket, which every new object
// falls in); b must count exactly one missing object a round.
func TestRepairCountsOnlyWhatItRepairs(t *testing.T) {
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := dialTick(t, ctx, url, 2*time.Millisecond), dialTick(t, ctx, url, 2*time.Millisecond)
	repairsAllowed[b.Node()] = true
	x, _ := a.Create(map[string]any{"n": 1})
	waitFor(t, "b sees x", 5*time.Second, func() bool { _, ok := b.World().Get(x); return ok })
	// b's handshake asks for a refresh once it has the node's metadata;
	// an answer still on its way would bring x back with no repair. Wait
	// until the node has answered it, then for an object sent after.
	waitFor(t, "the node answers b's refresh request", 5*time.Second, func() bool {
		return srv.RefreshAnswered(b.Identifier())
	})
	y, _ := a.Create(map[string]any{"n": 2})
	waitFor(t, "b sees y", 5*time.Second, func() bool { _, ok := b.World().Get(y); return ok })

	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		n, prev := 0, ""
		defer func() { churned <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id, err := a.Create(map[string]any{"n": n})
			if err != nil {
				return
			}
			if prev != "" {
				a.Remove(prev)
			}
			prev = id
			n++
			time.Sleep(200 * time.Microsecond)
		}
	}()
	const rounds = 6
	for i := 1; i <= rounds; i++ {
		// Lost under b's lock, as anything b's node does: between a
		// repair record's count and its apply, a removal from outside
		// would be undone unseen (the record was counted present).
		var res gameworld.Applied
		b.Node().Locked(func() { res = b.World().Apply([]gameworld.Change{{Type: gameworld.Remove, ID: x}}, nil) })
		if len(res.Records) != 1 {
			t.Fatalf("could not remove x at b: %+v", res)
		}
		waitFor(t, "x back at b", 10*time.Second, func() bool { _, ok := b.World().Get(x); return ok })
		waitFor(t, "the repair counted", 10*time.Second, func() bool { return b.Node().Repairs()[relay.RepairMissing] >= uint64(i) })
	}
	close(stop)
	t.Logf("a created %d objects during %d repairs", <-churned, rounds)
	time.Sleep(3 * testDigestInterval)
	if got := b.Node().Repairs(); !equalCounts(got, map[string]uint64{relay.RepairMissing: rounds, relay.RepairStale: 0, relay.RepairExtra: 0}) {
		t.Errorf("b repaired %v, want %d missing objects and nothing else", got, rounds)
	}
}
