package alloverse

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/solipsism/mesh/enet"
	"github.com/solipsism/mesh/internal/wiretest"
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
		return ok && o.Owner == agent && string(o.Properties.Value("color")) == `"green"`
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

// TestENetDiffsResumeAfterSet: an ENet client that could not use a diff
// asks for a set (acknowledges 0), takes it and acknowledges its
// revision; from then on a small change reaches it as a merge diff
// against that revision, never as another set and never not at all. The
// same with a world large enough that its set travels in ENet fragments.
// Repeated many times while every core is kept busy, with acknowledgements
// lost.
func TestENetDiffsResumeAfterSet(t *testing.T) {
	p := startPlace(t, Options{})
	addr := startENet(t, p)
	alice := p.solipsist(t, "alice")
	ball, _ := alice.Create(map[string]any{"kind": "ball", "x": 0})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Every third acknowledgement is lost, as on a lossy network: the
	// bridge goes on sending what the client already has, which must
	// not keep it from acknowledging again.
	var acks atomic.Int64
	c, err := DialENetClient(ctx, addr, ClientOptions{DropAck: func() bool { return acks.Add(1)%3 == 0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := wiretest.BusyCores()
	defer stop()

	// settled waits until the client holds the bridge's revision, the
	// bridge has its acknowledgement of it, and the packets sent before
	// (which the bridge stops sending then) have arrived.
	settled := func(what string) {
		t.Helper()
		caughtUp(t, p, c)
		// (While an acknowledgement is lost the bridge numbers its state
		// afresh every heartbeat: the client's revision moves on too.)
		waitFor(t, what+": the bridge holds the acknowledgement", 10*time.Second, func() bool {
			_, rev, _ := c.Document()
			p.bridge.mu.Lock()
			defer p.bridge.mu.Unlock()
			for s := range p.bridge.sessions {
				return s.ack == rev && rev == p.bridge.st.rev
			}
			return false
		})
		last, since := c.Stats(), time.Now()
		waitFor(t, what+": nothing more in flight", 10*time.Second, func() bool {
			if st := c.Stats(); st != last {
				last, since = st, time.Now()
			}
			return time.Since(since) > 300*time.Millisecond // (a resend comes within resendBeats)
		})
	}
	// change changes the ball and checks the form it arrived in.
	x := 0
	change := func(what, form string) {
		t.Helper()
		before := c.Stats()
		x++
		alice.Set(ball, map[string]any{"x": x})
		waitFor(t, fmt.Sprintf("%s: x=%d reaches the client", what, x), 10*time.Second, func() bool {
			doc, _, _ := c.Document()
			return doc != nil && string(entities(t, doc)[ball]["x"]) == strconv.Itoa(x)
		})
		got := c.Stats()
		// (A set of the revision before may still arrive first, sent
		// while the bridge waited for an acknowledgement that was lost.)
		if form == "merge" && (got.Last != "merge" || got.Failed != before.Failed) {
			t.Fatalf("%s: the change came as %+v (before %+v), want a merge diff", what, got, before)
		}
		if form == "set" && (got.Failed == before.Failed || got.Sets == before.Sets) {
			t.Fatalf("%s: %+v (before %+v), want a failed diff, then a set", what, got, before)
		}
	}
	// round: the client loses its history, so the next diff fails and it
	// asks for a set; once settled, the next change is a diff again.
	round := func(what string) {
		t.Helper()
		// Nothing on its way first: a state sent again, under a new
		// revision, after a lost acknowledgement would refill the
		// history.
		settled(what + ", before")
		c.mu.Lock()
		clear(c.hist)
		c.order = c.order[:0]
		c.mu.Unlock()
		change(what+", a diff the client cannot use", "set")
		settled(what)
		change(what+", after the set", "merge")
	}
	settled("the first set")
	for i := range 25 {
		round(fmt.Sprintf("round %d", i))
	}

	// A world large enough that its set goes in fragments.
	big := strings.Repeat("z", 2000)
	for i := range 100 {
		alice.Create(map[string]any{"kind": "filler", "i": i, "blob": big})
	}
	waitFor(t, "the bridge to hold the big world", 10*time.Second, func() bool { return len(p.bridge.Document()) > 200_000 })
	settled("the big world")
	for i := range 10 {
		round(fmt.Sprintf("fragmented round %d", i))
	}
}
