package relay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
)

// TestRegionChangeWithSlotReused: an object the observer was sent is
// removed and another takes its slot, within one tick; before the tick
// the observer's region changes (nothing, then everything: a bridge whose
// last client left and a new one came). The observer ends with the new
// object and without the old one, whose remove it must not miss.
func TestRegionChangeWithSlotReused(t *testing.T) {
	n, _ := startNode(t, relay.Options{Tick: time.Hour}) // flushes only when the test says
	flush := n.FlushNow
	w, err := n.Attach(relay.AttachOptions{Identifier: "writer-AAAAAAAA-BBBBBBBB"})
	if err != nil {
		t.Fatal(err)
	}
	view := newView()
	obs, err := n.Attach(relay.AttachOptions{Receiver: view})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(c gameworld.Change) {
		t.Helper()
		if res, err := w.Apply([]gameworld.Change{c}); err != nil || len(res.Refused) > 0 {
			t.Fatalf("%v: %v %v", c, err, res.Refused)
		}
	}
	pos := func(x int) gameworld.Properties {
		return gameworld.PropertiesOf(map[string]json.RawMessage{"position": []byte("[" + string(rune('0'+x)) + ",0,0]")})
	}
	apply(gameworld.Change{Type: gameworld.Add, ID: "old", Properties: pos(0)})
	flush()
	if _, ok := view.get("old"); !ok {
		t.Fatal("the observer lacks old")
	}
	oldSlot := func() uint32 { o, _ := n.World().Get("old"); return o.Slot }()
	apply(gameworld.Change{Type: gameworld.Remove, ID: "old"})
	apply(gameworld.Change{Type: gameworld.Add, ID: "new", Properties: pos(5)})
	if o, _ := n.World().Get("new"); o.Slot != oldSlot {
		t.Fatalf("new is in slot %d, old was in %d: the test needs the slot reused", o.Slot, oldSlot)
	}
	obs.SetInterest(nil, true)  // nothing
	obs.SetInterest(nil, false) // everything
	flush()
	_, hasNew := view.get("new")
	if _, hasOld := view.get("old"); hasOld || !hasNew {
		t.Fatalf("the observer holds old: %v, new: %v; want just new", hasOld, hasNew)
	}
}

// TestIdleAttachmentKeepsNoIndex: an attachment that wants nothing (a
// bridge serving no one) holds nothing, placed or not, and costs the node
// no spatial index; wanting everything again brings it the whole world,
// and nothing again takes it all away.
func TestIdleAttachmentKeepsNoIndex(t *testing.T) {
	n, _ := startNode(t, relay.Options{Tick: time.Hour})
	flush := n.FlushNow
	w, err := n.Attach(relay.AttachOptions{Identifier: "writer-AAAAAAAA-BBBBBBBB"})
	if err != nil {
		t.Fatal(err)
	}
	view := newView()
	obs, err := n.Attach(relay.AttachOptions{Receiver: view})
	if err != nil {
		t.Fatal(err)
	}
	obs.SetInterest(nil, true)
	w.Apply([]gameworld.Change{
		{Type: gameworld.Add, ID: "placed", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": []byte("[1,0,0]")})},
		{Type: gameworld.Add, ID: "unplaced", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"kind": []byte(`"sky"`)})},
	})
	flush()
	if n.SpatialIndexActive() {
		t.Error("an idle attachment made the node build a spatial index")
	}
	if d := view.diff(gameworld.New("empty")); d != "" {
		t.Errorf("the idle attachment holds: %s", d)
	}
	obs.SetInterest(nil, false)
	flush()
	if d := view.diff(n.World()); d != "" {
		t.Errorf("wanting everything again: %s", d)
	}
	obs.SetInterest(nil, true)
	flush()
	if d := view.diff(gameworld.New("empty")); d != "" {
		t.Errorf("idle again, the attachment holds: %s", d)
	}
}
