package priority_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// published runs one tick: Next, then End, and returns what each object
// (by slot) was published to: its Min and Max band, and All.
func published(s *priority.Schedule[int]) map[uint32]priority.Due[int] {
	out := map[uint32]priority.Due[int]{}
	for _, d := range s.Next() {
		out[d.Rec.Slot] = d
	}
	s.End()
	return out
}

// A viewer in band b of an object that changes every fourth tick is sent
// each change within 2^b ticks (every band within 2^(bands-1), band 0
// included), never the same change twice, and the last change in the end.
func TestScheduleBands(t *testing.T) {
	const bands, ticks = 5, 200
	for _, slot := range []uint32{0, 1, 7, 1000} {
		s := priority.NewSchedule[int](bands)
		lastChange := -1
		got := make([]int, bands) // the last change each band was sent
		sentAt := make([]int, bands)
		for tick := 0; tick < ticks; tick++ {
			if tick%4 == 0 && tick < ticks-40 {
				s.Note(update(slot, tick), true, tick)
				lastChange = tick
			}
			for _, d := range published(s) {
				n, _ := d.Rec.Properties.Get("n")
				var v int
				json.Unmarshal(n, &v)
				if d.Zero && !d.All {
					t.Fatalf("slot %d tick %d: band 0 published to at a tick not for every band", slot, tick)
				}
				var to []int
				if d.Zero {
					to = append(to, 0)
				}
				for b := d.Min; b <= d.Max; b++ {
					to = append(to, b)
				}
				for _, b := range to {
					if got[b] == v && sentAt[b] > 0 {
						t.Fatalf("slot %d tick %d: band %d sent change %d twice", slot, tick, b, v)
					}
					got[b], sentAt[b] = v, tick
				}
			}
			for b := 1; b < bands; b++ {
				// What band b has is at most 2^b ticks behind.
				if lastChange >= 0 && got[b] < lastChange && tick-lastChange >= 1<<b {
					t.Fatalf("slot %d tick %d: band %d has change %d, the object is at %d since tick %d", slot, tick, b, got[b], lastChange, lastChange)
				}
			}
			if lastChange >= 0 && got[0] < lastChange && tick-lastChange >= 1<<(bands-1) {
				t.Fatalf("slot %d tick %d: band 0 has change %d, want %d within %d ticks", slot, tick, got[0], lastChange, 1<<(bands-1))
			}
		}
		if s.Len() != 0 {
			t.Fatalf("slot %d: %d objects still pending long after the last change", slot, s.Len())
		}
	}
}

// Changes fold into one record (every property named, at its last value);
// an add, a remove or a transfer drops what was pending; an update of an
// object without a position goes to every band at the next tick; Pending
// lists an owner's objects.
func TestScheduleFolds(t *testing.T) {
	s := priority.NewSchedule[int](4)
	props := func(kv ...string) gameworld.Properties {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = json.RawMessage(kv[i+1])
		}
		return gameworld.PropertiesOf(m)
	}
	rec := func(typ gameworld.ChangeType, slot uint32, owner string, p gameworld.Properties) *peer.Record {
		return peer.NewRecord(gameworld.Change{Type: typ, ID: fmt.Sprint("o", slot), Owner: owner, Properties: p}, slot)
	}
	s.Note(rec(gameworld.Update, 1, "w", props("color", `"red"`)), true, 0)
	s.Note(rec(gameworld.Update, 1, "w", props("position", "[1,2,3]")), true, 0)
	s.Note(rec(gameworld.Update, 2, "v", props("n", "1")), true, 0)
	s.Note(rec(gameworld.Update, 3, "w", props("n", "1")), true, 0)
	s.Note(rec(gameworld.Remove, 3, "w", gameworld.Properties{}), false, 0)
	s.Note(rec(gameworld.Update, 4, "v", props("n", "1")), false, 0) // no position
	var mine []string
	s.Pending("w", func(r *peer.Record, _ int) { mine = append(mine, r.ID) })
	if fmt.Sprint(mine) != "[o1]" || s.Len() != 3 {
		t.Fatalf("pending of w: %v (of %d); want [o1] of 3 (o3 removed)", mine, s.Len())
	}
	var folded *peer.Record
	s.Pending("", func(r *peer.Record, _ int) {
		if r.ID == "o1" {
			folded = r
		}
	})
	if c, _ := folded.Properties.Get("color"); string(c) != `"red"` {
		t.Fatalf("o1's pending record %s lost the colour", folded.Encoded())
	}
	due := published(s)
	if d, ok := due[4]; !ok || !d.All || !d.Zero || d.Min != 1 {
		t.Fatalf("the update without a position: %+v, %v; want it to every band at once", d, ok)
	}
	if _, ok := due[4]; ok && s.Len() != 2 {
		t.Fatalf("%d pending after the forced one went, want 2", s.Len())
	}
}
