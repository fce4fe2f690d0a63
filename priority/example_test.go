package priority_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// A client sees a near object (band 0) and a far one (band 2: every
// fourth tick), both changing every tick: the near one goes every tick,
// the far one every fourth, at its latest value.
func ExamplePlan() {
	p := priority.New()
	bands := []int{0, 2}
	for tick := range 4 {
		es := p.Entries(2)
		for j, id := range []string{"near", "far"} {
			rec := peer.NewRecord(gameworld.Change{Type: gameworld.Update, ID: id, Owner: "w",
				Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(tick))})}, uint32(j))
			es[j] = priority.Entry{Rec: rec, Verdict: peer.Send, Placed: true}
		}
		recs := []*peer.Record{es[0].Rec, es[1].Rec}
		first := p.Decide(es, true, func(j int) int { return bands[j] }, priority.Budget{Tick: 50 * time.Millisecond, Now: time.Now()})
		fmt.Printf("tick %d:", tick)
		for _, o := range first {
			fmt.Printf(" %s=%s", o.Rec.ID, o.Rec.Properties.Value("n"))
		}
		for j, r := range recs {
			if !p.Waits(j) {
				fmt.Printf(" %s=%s", r.ID, r.Properties.Value("n"))
			}
		}
		fmt.Printf(" (owing %d)\n", p.Owing())
	}
	// Output:
	// tick 0: near=0 (owing 1)
	// tick 1: near=1 (owing 1)
	// tick 2: near=2 (owing 1)
	// tick 3: far=3 near=3 (owing 0)
}

// One object changes every tick; its viewers share one timetable (3
// bands: band 1 every second tick, every band every fourth). Each tick
// says which bands are published to, with the object's latest value.
func ExampleSchedule() {
	s := priority.NewSchedule[string](3)
	for tick := range 6 {
		rec := peer.NewRecord(gameworld.Change{Type: gameworld.Update, ID: "ball", Owner: "w",
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(tick))})}, 7)
		s.Note(rec, true, "in the hall")
		for _, d := range s.Next() {
			fmt.Printf("tick %d: n=%s to bands %d-%d, band 0 too: %v\n", tick, d.Rec.Properties.Value("n"), d.Min, d.Max, d.Zero)
		}
		s.End()
	}
	// Output:
	// tick 0: n=0 to bands 1-2, band 0 too: true
	// tick 2: n=2 to bands 1-1, band 0 too: false
	// tick 4: n=4 to bands 1-2, band 0 too: true
}
