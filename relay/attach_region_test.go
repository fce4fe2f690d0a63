package relay

import (
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
)

// viewReceiver keeps what an attachment was routed: object id to owner.
type viewReceiver struct {
	mu   sync.Mutex
	objs map[string]string
}

func (v *viewReceiver) Receive(ds []Delivery) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range ds {
		if d.Type == gameworld.Remove {
			delete(v.objs, d.ID)
		} else {
			v.objs[d.ID] = d.Owner
		}
	}
}

func (v *viewReceiver) ids() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]bool{}
	for id := range v.objs {
		out[id] = true
	}
	return out
}

// TestRegionChangeWithSlotReused: an object the observer was sent is
// removed and another takes its slot, within one tick; before the tick
// the observer's region changes (nothing, then everything: a bridge whose
// last client left and a new one came). The observer ends with the new
// object and without the old one, whose remove it must not miss.
func TestRegionChangeWithSlotReused(t *testing.T) {
	n, _ := startNode(t, Options{Tick: time.Hour}) // flushes only when the test says
	flush := func() { n.mu.Lock(); n.flushLocked(); n.mu.Unlock() }
	w, err := n.Attach(AttachOptions{Identifier: "writer-AAAAAAAA-BBBBBBBB"})
	if err != nil {
		t.Fatal(err)
	}
	view := &viewReceiver{objs: map[string]string{}}
	obs, err := n.Attach(AttachOptions{Receiver: view})
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
		return gameworld.Properties{"position": []byte("[" + string(rune('0'+x)) + ",0,0]")}
	}
	apply(gameworld.Change{Type: gameworld.Add, ID: "old", Properties: pos(0)})
	flush()
	if !view.ids()["old"] {
		t.Fatalf("the observer holds %v, want old", view.ids())
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
	if got := view.ids(); len(got) != 1 || !got["new"] {
		t.Fatalf("the observer holds %v, want just new", got)
	}
}
