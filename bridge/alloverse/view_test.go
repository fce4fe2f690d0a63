package alloverse

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// viewDoc is the document a client with view now holds: the state's
// entities of now, at its revision.
func viewDoc(s *state, now map[string]bool) []byte {
	p := s.viewSet(now)
	return append([]byte{'{'}, p[len(`{"patch_style":"set",`):]...)
}

// TestViewDiffs: a world of entities that move, appear, go and change
// parent at random, and a client whose avatar moves; at every revision the
// client applies what it is sent (acknowledging some revisions, not
// others, as a lossy link would) and holds exactly the view's document:
// whatever came into view whole, whatever left removed, the rest changed
// as it changed. In every patch style, and for a client that takes only
// merge patches and sets.
func TestViewDiffs(t *testing.T) {
	for _, tc := range []struct {
		style     PatchStyle
		mergeOnly bool
	}{{Smallest, false}, {Merge, false}, {Apply, false}, {Smallest, true}, {Apply, true}} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("style%d/merge-only %v/seed%d", tc.style, tc.mergeOnly, seed), func(t *testing.T) {
				t.Parallel()
				checkRandomViews(t, tc.style, tc.mergeOnly, seed)
			})
		}
	}
}

func checkRandomViews(t *testing.T, style PatchStyle, mergeOnly bool, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	s := newState(0, 16, style)
	s.views = true
	const radius, margin = 10.0, 2.0
	props := func(m map[string]any) gameworld.Properties {
		raw := map[string]json.RawMessage{}
		for k, v := range m {
			raw[k], _ = json.Marshal(v)
		}
		return gameworld.PropertiesOf(raw)
	}
	put := func(id, owner string, p gameworld.Properties) {
		typ := gameworld.Update
		if s.entities[id] == nil {
			typ = gameworld.Add
		}
		s.apply(relay.Delivery{Change: gameworld.Change{Type: typ, ID: id, Owner: owner}, After: p})
	}
	place := func() map[string]any {
		x := float64(r.IntN(60) - 30)
		switch r.IntN(4) {
		case 0:
			return map[string]any{"position": []float64{x, 0, 0}}
		case 1:
			return map[string]any{"transform": map[string]any{"matrix": []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, 0, 0, 1}}}
		case 2:
			return map[string]any{"relationships": map[string]any{"parent": fmt.Sprintf("e%d", r.IntN(8))}}
		}
		return map[string]any{"n": r.IntN(5)} // no place
	}
	put("avatar", "agent", props(map[string]any{"position": []float64{0, 0, 0}}))
	s.commit()
	v := &view{}
	var doc []byte // what the client holds; nil: nothing yet
	held := map[uint64][]byte{}
	ack := uint64(0)
	sets := 0
	for step := range 80 {
		for range 1 + r.IntN(4) {
			id := fmt.Sprintf("e%d", r.IntN(8))
			switch {
			case r.IntN(6) == 0 && s.entities[id] != nil:
				s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Remove, ID: id}})
			case r.IntN(8) == 0:
				put("avatar", "agent", props(map[string]any{"position": []float64{float64(r.IntN(40) - 20), 0, 0}}))
			default:
				m := place()
				m["v"] = step
				owner := "other"
				if r.IntN(10) == 0 {
					owner = "agent"
				}
				put(id, owner, props(m))
			}
		}
		if !s.commit() {
			continue
		}
		now := s.visible("agent", "avatar", radius, margin, v.held[ack])
		pkt := s.viewPacket(v, now, ack, mergeOnly)
		want := viewDoc(s, now)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(pkt, &m); err != nil {
			t.Fatalf("step %d: %v\n%s", step, err, pkt)
		}
		if mergeOnly && string(m["patch_style"]) == `"apply"` {
			t.Fatalf("step %d: a merge-only client was sent an apply patch", step)
		}
		var got []byte
		if string(m["patch_style"]) == `"set"` {
			got = append([]byte{'{'}, pkt[len(`{"patch_style":"set",`):]...)
			sets++
		} else {
			got, _ = applyPacket(t, held[ack], m)
		}
		if !sameJSON(got, want) {
			t.Fatalf("step %d, revision %d from %d:\nheld %s\npacket %s\ngot %s\nwant %s", step, s.rev, ack, held[ack], pkt, got, want)
		}
		// The view: its own, the placeless, those near the avatar, and
		// nothing past the margin.
		for id, e := range s.entities {
			rt := s.root(id)
			d := math.Abs(rt.pos[0] - s.entities["avatar"].pos[0])
			switch {
			case e.owner == "agent" || rt.owner == "agent" || !rt.hasPos || d <= radius:
				if !now[id] {
					t.Fatalf("step %d: %s (owner %s, root at %v, placed %v) is not in the view of an avatar at %v", step, id, e.owner, rt.pos, rt.hasPos, s.entities["avatar"].pos)
				}
			case d > radius+margin:
				if now[id] {
					t.Fatalf("step %d: %s at %v is in the view of an avatar at %v", step, id, rt.pos, s.entities["avatar"].pos)
				}
			}
		}
		doc = got
		held[s.rev] = doc
		if r.IntN(3) > 0 { // some acknowledgements are lost
			ack = s.rev
		}
	}
	if sets > 2 {
		t.Errorf("%d sets: a client that acknowledges is sent diffs", sets)
	}
	_ = doc
}

// TestViews: over a real WebSocket, an Alloverse client on a bridge with
// a view radius holds the entities near its avatar (by position or
// transform, a child where its root is), those without a place and its
// own, and nothing else; entities come into and go out of its view as
// they move, and as its avatar moves, past a margin for those it holds.
// It always holds the bridge's document of its view.
func TestViews(t *testing.T) {
	p := startPlace(t, Options{ViewRadius: 10})
	alice := p.solipsist(t, "alice")
	mk := func(id string, props map[string]any) {
		t.Helper()
		if err := alice.CreateWithID(id, props); err != nil {
			t.Fatal(err)
		}
	}
	matrix := func(x float64) map[string]any {
		return map[string]any{"matrix": []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, 0, 0, 1}}
	}
	mk("near", map[string]any{"position": []float64{1, 0, 1}})
	mk("far", map[string]any{"position": []float64{100, 0, 0}})
	mk("free", map[string]any{"kind": "sky"})
	mk("tree", map[string]any{"transform": matrix(3)})
	mk("farbox", map[string]any{"transform": matrix(100)})
	mk("leaf", map[string]any{"relationships": map[string]any{"parent": "farbox"}, "transform": matrix(0)})

	c := p.agent(t, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	avatar, _, err := c.Announce(ctx, map[string]any{"transform": matrix(0)})
	if err != nil {
		t.Fatal(err)
	}
	holds := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		var got []string
		waitFor(t, fmt.Sprintf("the client to hold %v", want), 10*time.Second, func() bool {
			doc, _, ok := c.Document()
			if !ok {
				return false
			}
			ents := entities(t, doc)
			got = slices.Sorted(maps.Keys(ents))
			if !slices.Equal(got, want) {
				return false
			}
			p.bridge.mu.Lock()
			defer p.bridge.mu.Unlock()
			for id, comps := range ents {
				e := p.bridge.st.entities[id]
				if e == nil || !sameJSON(mustJSON(comps), mustJSON(e.all())) {
					return false
				}
			}
			return true
		})
	}
	holds("near", "free", "tree", avatar)
	set := func(id string, props map[string]any) {
		t.Helper()
		if err := alice.Set(id, props); err != nil {
			t.Fatal(err)
		}
	}
	set("far", map[string]any{"position": []float64{5, 0, 0}})
	holds("near", "far", "free", "tree", avatar)
	set("near", map[string]any{"position": []float64{50, 0, 0}})
	holds("far", "free", "tree", avatar)
	// Held: it stays within the margin, and goes past it.
	set("far", map[string]any{"position": []float64{11.5, 0, 0}, "n": 1})
	holds("far", "free", "tree", avatar)
	set("far", map[string]any{"position": []float64{12.5, 0, 0}})
	holds("free", "tree", avatar)

	// The avatar moves: the far box and its leaf come into view.
	if r, err := c.Request(ctx, "change_components", avatar, "add_or_change", map[string]any{"transform": matrix(98)}); err != nil || responseError(r) != nil {
		t.Fatalf("moving the avatar: %s, %v", mustJSON(r), err)
	}
	holds("free", "farbox", "leaf", avatar)
	set("farbox", map[string]any{"color": "red"})
	holds("free", "farbox", "leaf", avatar)
}

// BenchmarkViews: 1,000 entities on a 100 × 100 m square, 100 of them
// moving every heartbeat, and 100 clients (each with an avatar somewhere
// on the square) that acknowledge every state: every client sent the
// whole world ("everything"), or its view of 15 m ("view"). Reports the
// bytes a client is sent per heartbeat, the entities it holds and the
// bridge's CPU per heartbeat, on one goroutine:
//
//	go test ./bridge/alloverse -run '^$' -bench Views -benchtime 200x
func BenchmarkViews(b *testing.B) {
	const entities, moving, clients = 1000, 100, 100
	for _, radius := range []float64{0, 15} {
		name := "everything"
		if radius > 0 {
			name = "view"
		}
		b.Run(name, func(b *testing.B) {
			s := newState(0, DefaultHistory, Merge)
			s.views = radius > 0
			r := rand.New(rand.NewPCG(3, 3))
			place := func(x, z float64) gameworld.Properties {
				m, _ := json.Marshal(map[string]any{"matrix": []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, x, 0, z, 1}})
				return gameworld.PropertiesOf(map[string]json.RawMessage{"transform": m, "geometry": json.RawMessage(`{"type":"inline","name":"box"}`)})
			}
			xs, zs := make([]float64, entities), make([]float64, entities)
			for i := range entities {
				xs[i], zs[i] = r.Float64()*100, r.Float64()*100
				s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("e%04d", i), Owner: "world"}, After: place(xs[i], zs[i])})
			}
			views := make([]*view, clients)
			acks := make([]uint64, clients)
			for c := range clients {
				s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("avatar%03d", c), Owner: fmt.Sprintf("agent%03d", c)},
					After: place(r.Float64()*100, r.Float64()*100)})
				views[c] = &view{}
			}
			s.commit()
			var bytes, held int
			beat := func() {
				for i := range moving {
					xs[i], zs[i] = xs[i]+0.1, zs[i]+0.05
					s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("e%04d", i)}, After: place(xs[i], zs[i])})
				}
				s.commit()
				for c := range clients {
					var pkt []byte
					if radius > 0 {
						now := s.visible(fmt.Sprintf("agent%03d", c), fmt.Sprintf("avatar%03d", c), radius, relay.DefaultInterestMargin, views[c].held[acks[c]])
						pkt = s.viewPacket(views[c], now, acks[c], true)
						held += len(now)
					} else {
						pkt = s.mergePacketFor(acks[c])
						held += len(s.entities)
					}
					bytes += len(pkt)
					acks[c] = s.rev
				}
			}
			for range 20 { // every client past its first set
				beat()
			}
			bytes, held = 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				beat()
			}
			cpu := cpuTime() - cpu0
			n := float64(b.N)
			b.ReportMetric(float64(bytes)/n/clients, "bytes/client/beat")
			b.ReportMetric(float64(held)/n/clients, "entities/client")
			b.ReportMetric(float64(cpu.Microseconds())/n/1000, "cpu-ms/beat")
		})
	}
}
