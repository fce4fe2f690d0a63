package snapshot

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/scope"
)

func sameElements(want []byte, got map[string]json.RawMessage) bool {
	var w map[string]json.RawMessage
	if json.Unmarshal(want, &w) != nil || len(w) != len(got) {
		return false
	}
	for k, v := range w {
		if string(got[k]) != string(v) {
			return false
		}
	}
	return true
}

// TestBuffersUnderLoss: a grid of 3,000 blocks (many packets' worth) and
// bursts of block changes reach a snapshot client through 20% loss,
// duplicates and reordering: it fills over several ticks, then follows
// each change, and ends holding the node's grid; its element events
// rebuild the same grid. Then one block's change costs about one block.
func TestBuffersUnderLoss(t *testing.T) {
	p := startPlace(t, Options{})
	sol := p.solipsist(t)
	blocks := map[string]map[string]any{}
	for i := range 3000 {
		blocks[fmt.Sprintf("%d,%d,%d", i%20, i/20%15, i/300)] = map[string]any{"c": i % 9}
	}
	if err := sol.CreateWithID("grid", map[string]any{"kind": "grid"}); err != nil {
		t.Fatal(err)
	}
	if err := sol.SetElements("grid", "blocks", blocks); err != nil {
		t.Fatal(err)
	}
	lossy := startLossy(t, p.srv.Addr(), 3)
	c := dial(t, lossy.Addr(), ClientOptions{})
	// A second client, without loss: the server encodes both at once.
	direct := dial(t, p.srv.Addr().String(), ClientOptions{})
	var mu sync.Mutex
	rebuilt := map[string]json.RawMessage{}
	c.SubscribeElements(func(e ElementChange) {
		mu.Lock()
		defer mu.Unlock()
		if e.Object != "grid" || e.Scope != "blocks" {
			return
		}
		if e.Fields == nil {
			delete(rebuilt, e.ID)
		} else {
			rebuilt[e.ID] = e.Fields
		}
	})
	want := func() []byte {
		o, _ := p.node.World().Get("grid")
		b, _ := o.Scopes.AppendJSON(nil, "blocks")
		return b
	}
	waitFor(t, "the client fills the grid", 30*time.Second, func() bool { return sameElements(want(), c.Elements("grid", "blocks")) })
	rng := rand.New(rand.NewPCG(5, 5))
	for burst := range 30 {
		for range 1 + rng.IntN(10) {
			id := fmt.Sprintf("%d,%d,%d", rng.IntN(20), rng.IntN(15), rng.IntN(12))
			if rng.IntN(3) == 0 {
				sol.RemoveElements("grid", "blocks", id)
			} else {
				sol.SetElements("grid", "blocks", map[string]map[string]any{id: {"c": 100 + burst}})
			}
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	}
	waitFor(t, "the client follows the grid", 20*time.Second, func() bool { return sameElements(want(), c.Elements("grid", "blocks")) })
	waitFor(t, "the direct client follows the grid", 20*time.Second, func() bool { return sameElements(want(), direct.Elements("grid", "blocks")) })
	mu.Lock()
	events := len(rebuilt)
	ok := sameElements(want(), rebuilt)
	mu.Unlock()
	if !ok {
		t.Fatalf("the element events rebuilt %d blocks, not the grid", events)
	}
}

// TestBufferPieceSplitsAndMarks: a piece fills a buffer in id order as
// far as its budget goes, and the tiers a client holds after it ask only
// for the rest, then only for what changed.
func TestBufferPieceSplitsAndMarks(t *testing.T) {
	g := &ghost{}
	d := map[string]map[string]any{}
	for i := range 10 {
		d[fmt.Sprint(i)] = map[string]any{"c": i}
	}
	raw, _ := json.Marshal(map[string]any{"added": d, "ver": 1, "full": true})
	g.applyScopes(mustDelta(t, raw), 1)
	b := g.bufs["blocks"]
	entry := func(i int) int { return packedBits(1) + 8 + 1 + fieldsBits(fmt.Appendf(nil, `{"c":%d}`, i), b.nameIdx) }
	names := packedBits(0) + packedBits(1) + packedBits(1) + 8 // the field name "c", with the first piece
	p, _, spans := b.piece("blocks", false, 0, nil, 16+8+48+names+16+entry(0)+entry(1)+entry(2)+entry(3)+entry(4)/2)
	if p == nil || len(p.entries) != 4 || p.entries[3].id != "3" || len(p.clears) != 1 || p.clears[0] != [2]string{"", "3"} || len(p.defs) != 1 {
		t.Fatalf("first piece %+v", p)
	}
	var held []tier
	for _, sp := range spans {
		held = mark(held, sp, 2)
	}
	if fmt.Sprint(held) != "[{3 2} { 0}]" {
		t.Fatalf("held %v", held)
	}
	p, _, spans = b.piece("blocks", true, 1, held, 1<<20)
	if len(p.entries) != 6 || p.entries[0].id != "4" || p.clears[0] != [2]string{"3", ""} || len(p.defs) != 0 {
		t.Fatalf("second piece %+v", p)
	}
	for _, sp := range spans {
		held = mark(held, sp, 3)
	}
	if !b.complete(held) {
		t.Fatalf("not complete: %v", held)
	}
	g.applyScopes(mustDelta(t, []byte(`{"ver":2,"modified":{"7":{"c":70}},"removed":["2"]}`)), 4)
	p, _, _ = b.piece("blocks", true, 1, held, 1<<20)
	if len(p.clears) != 0 || len(p.entries) != 2 || p.entries[0].id != "2" || p.entries[0].fields != nil || string(p.entries[1].fields) != `{"c":70}` {
		t.Fatalf("the change: %+v", p)
	}
}

func mustDelta(t *testing.T, raw []byte) map[string]scope.Delta {
	t.Helper()
	d, err := scope.Limits{}.DecodeDelta(raw)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]scope.Delta{"blocks": d}
}

// TestBufferSendsOnTheirWay: a block's change goes once while its send is
// on its way, again once that is overdue; a send of changes built on a
// send that was lost does not count as held, so the range goes whole.
func TestBufferSendsOnTheirWay(t *testing.T) {
	s := clockedServer()
	c := &conn{despawns: map[uint32]bool{}, loaded: 2}
	grid := func(tick uint32, d string) {
		s.tick = tick
		typ := gameworld.Update
		if tick == 1 {
			typ = gameworld.Add
		}
		s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: typ, ID: "grid", Scopes: mustDelta(t, []byte(d))}, After: gameworld.PropertiesOf(map[string]json.RawMessage{})})
	}
	snap := func(tick uint32) (ghosts int) {
		s.tick = tick
		var w Writer
		s.snapshotLocked(c, &w)
		if sn := c.ring[tick%ringSize]; sn != nil && sn.tick == tick {
			return len(sn.ghosts)
		}
		return 0
	}
	grid(1, `{"ver":1,"full":true,"added":{"a":{"c":1},"b":{"c":2}}}`)
	if snap(1) == 0 {
		t.Fatal("the grid was not sent")
	}
	s.ackLocked(c, 1, 0)
	c.ackDelay = 1 // acknowledgements come a tick late: a send is on its way for 2 ticks
	grid(2, `{"ver":2,"modified":{"a":{"c":3}}}`)
	if snap(2) == 0 {
		t.Fatal("the change was not sent")
	}
	if snap(3) != 0 || snap(4) != 0 {
		t.Fatal("the change went again while on its way")
	}
	if snap(5) == 0 {
		t.Fatal("the change did not go again once overdue")
	}
	s.ackLocked(c, 5, 0)
	cg := c.ghosts[s.objects["grid"].slot]
	if got := heldAsOf(cg.bufs["blocks"], span{name: "blocks", first: true}); got != 5 {
		t.Fatalf("held as of %d, want 5", got)
	}

	// A delta on a send that was lost: acknowledged, it is not held.
	grid(6, `{"ver":3,"added":{"c":{"c":4}}}`)
	snap(6) // lost
	grid(7, `{"ver":4,"added":{"d":{"c":5}}}`)
	snap(7) // only d: c is on its way
	last := cg.sends[(cg.n-1)%ghostHistory]
	if len(last.spans) != 1 || last.spans[0].base != 6 {
		t.Fatalf("the send at 7: %+v", last.spans)
	}
	s.ackLocked(c, 7, 0)
	if got := heldAsOf(cg.bufs["blocks"], span{name: "blocks", first: true}); got != 5 {
		t.Fatalf("after the lost send, held as of %d, want 5", got)
	}
}

// TestTooBigOverUDP: a real client of a real server holds an object whose
// properties outgrow a packet as {"$tooBig": their size}, its blocks
// beside, and its properties again once they fit.
func TestTooBigOverUDP(t *testing.T) {
	p := startPlace(t, Options{})
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	set := func(typ gameworld.ChangeType, note, scopes string) {
		ch := gameworld.Change{Type: typ, ID: "o", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"note": json.RawMessage(`"` + note + `"`)})}
		if scopes != "" {
			ch.Scopes = mustDelta(t, []byte(scopes))
		}
		if _, err := p.node.Apply([]gameworld.Change{ch}); err != nil {
			t.Fatal(err)
		}
	}
	set(gameworld.Add, "small", `{"ver":1,"full":true,"added":{"a":{"c":1}}}`)
	waitFor(t, "the small object", 10*time.Second, func() bool { return string(c.Objects()["o"].Value("note")) == `"small"` })
	set(gameworld.Update, strings.Repeat("x", MaxJSONBytes), `{"ver":2,"added":{"b":{"c":2}}}`)
	waitFor(t, "the object told too big, with both blocks", 10*time.Second, func() bool {
		return string(c.Objects()["o"].Value(TooBigProperty)) == "1011" && len(c.Elements("o", "blocks")) == 2
	})
	set(gameworld.Update, "small again", "")
	waitFor(t, "the object whole again", 10*time.Second, func() bool {
		o := c.Objects()["o"]
		return string(o.Value("note")) == `"small again"` && o.Value(TooBigProperty) == nil
	})
}

// TestTooBigIsTold: an object whose json field is over MaxJSONBytes stays
// a ghost, counted and sent, its field standing as {"$tooBig": its size}
// until it fits again; its scopes go on all along.
func TestTooBigIsTold(t *testing.T) {
	s := clockedServer()
	c := &conn{despawns: map[uint32]bool{}, loaded: 2}
	s.clients = map[netip.AddrPort]*conn{netip.MustParseAddrPort("127.0.0.1:1"): c}
	w := newWorld([]GhostType{GenericType, TransformType})
	set := func(tick uint32, typ gameworld.ChangeType, note string, scopes string) {
		s.tick = tick
		ch := gameworld.Change{Type: typ, ID: "o"}
		if scopes != "" {
			ch.Scopes = mustDelta(t, []byte(scopes))
		}
		s.applyLocked(relay.Delivery{Change: ch, After: gameworld.PropertiesOf(map[string]json.RawMessage{"note": json.RawMessage(`"` + note + `"`)})})
	}
	// step sends tick's snapshot to a client that decodes it, and returns
	// the relevant ghosts it announced, the ghosts it carried and its
	// despawns.
	step := func(tick uint32) (relevant, sent, despawns int) {
		s.tick = tick
		var wr Writer
		s.snapshotLocked(c, &wr)
		s.ackLocked(c, tick, 0)
		if err := w.apply(wr.Bytes()); err != nil {
			t.Fatal(err)
		}
		r := NewReader(wr.Bytes())
		r.ReadBits(8) // message type
		readHeader(r)
		readPrefabs(r)
		despawns = int(r.ReadBits(32))
		return int(r.ReadBits(32)), len(c.ring[tick%ringSize].ghosts), despawns
	}
	w.loaded, w.hashes = []int{0, 1}, []uint32{GenericType.Hash(), TransformType.Hash()}
	set(1, gameworld.Add, "small", `{"ver":1,"full":true,"added":{"a":{"c":1}}}`)
	if n, sent, _ := step(1); n != 1 || sent != 1 {
		t.Fatalf("small: %d relevant, %d sent", n, sent)
	}
	big := strings.Repeat("x", MaxJSONBytes)
	set(2, gameworld.Update, big, `{"ver":2,"added":{"b":{"c":2}}}`)
	if n, sent, despawns := step(2); n != 1 || sent != 1 || despawns != 0 {
		t.Fatalf("too big: %d relevant, %d sent, %d despawns", n, sent, despawns)
	}
	if got := string(w.Objects()["o"].Value(TooBigProperty)); got != "1011" {
		t.Fatalf("the client has %s as %s, want 1011 (the properties' size)", TooBigProperty, got)
	}
	if got := len(w.Elements("o", "blocks")); got != 2 {
		t.Fatalf("the client holds %d blocks while the object is too big, want 2", got)
	}
	set(3, gameworld.Update, "small again", "")
	if n, sent, _ := step(3); n != 1 || sent != 1 {
		t.Fatalf("small again: %d relevant, %d sent", n, sent)
	}
	if got := string(w.Objects()["o"].Value("note")); got != `"small again"` {
		t.Fatalf("the client has note %s", got)
	}
}

// TestWholeResendOfAScopedGhost: a ghost with a scope whose every send
// since the last acknowledged one was lost (its baselines gone) is sent
// whole, and a client takes a whole ghost as a spawn: its scopes named
// again, their field-name tables afresh. The client applies that packet
// and holds the ghost's elements with their fields.
func TestWholeResendOfAScopedGhost(t *testing.T) {
	s := clockedServer()
	c := &conn{despawns: map[uint32]bool{}, loaded: 2}
	cw := newWorld([]GhostType{GenericType, TransformType})
	cw.loaded, cw.hashes = []int{0, 1}, []uint32{GenericType.Hash(), TransformType.Hash()}
	snap := func(tick uint32) error {
		s.tick = tick
		var w Writer
		s.snapshotLocked(c, &w)
		return cw.apply(w.Bytes())
	}
	s.tick = 1
	s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: "grid", Scopes: mustDelta(t, []byte(`{"ver":1,"full":true,"added":{"a":{"c":1},"b":{"c":2}}}`))},
		After: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage("0")})})
	if err := snap(1); err != nil {
		t.Fatal(err)
	}
	s.ackLocked(c, 1, 0)
	// Every send of the next ghostHistory+1 ticks is lost: the ghost
	// changes each tick, none is acknowledged, and its baselines go.
	for tick := uint32(2); tick <= ghostHistory+2; tick++ {
		s.tick = tick
		s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: "grid", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(tick))})},
			After: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(tick))})})
		var w Writer
		s.snapshotLocked(c, &w) // lost
	}
	tick := uint32(ghostHistory + 3)
	s.tick = tick
	s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: "grid", Scopes: mustDelta(t, []byte(`{"ver":2,"modified":{"a":{"c":3}}}`))},
		After: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(tick))})})
	if err := snap(tick); err != nil {
		t.Fatalf("the whole re-send: %v", err)
	}
	g := cw.ghosts[cw.objects["grid"]]
	if g == nil || string(g.bufs["blocks"]["a"]) != `{"c":3}` || string(g.bufs["blocks"]["b"]) != `{"c":2}` {
		t.Fatalf("the client holds %+v", g)
	}
}
