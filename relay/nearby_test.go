package relay

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

// TestNearbyLeavesOnlyWhatWaits: of a log of adds, removes, transfers and
// updates (placed or not, its own, in a crowd or scattered), what a link
// on the schedule takes by column is in log order, part of its entries,
// and leaves out only entries that wait for the schedule; where a placed
// update lies outside all of its boxes, it looks at every entry. Regions
// of one to three boxes, huge (wide) or not, with rooms or not.
func TestNearbyLeavesOnlyWhatWaits(t *testing.T) {
	const near = 5.0
	rng := rand.New(rand.NewPCG(5, 6))
	n := &Node{opts: Options{Priority: PriorityOptions{Near: near, Bands: 4}, InterestMargin: 2}}
	types := []gameworld.ChangeType{gameworld.Update, gameworld.Update, gameworld.Update, gameworld.Add, gameworld.Remove, gameworld.Transfer}
	fast := map[bool]int{}
	for round := range 400 {
		ls, other := &linkState{}, &linkState{}
		spread := []float64{30, 40, 300}[round%3]
		var log []logEntry
		for i := range 1 + rng.IntN(300) {
			e := logEntry{rec: peer.NewRecord(gameworld.Change{Type: types[rng.IntN(len(types))], ID: fmt.Sprint("o", i)}, uint32(i))}
			if e.rec.Type != gameworld.Remove && rng.IntN(10) > 0 {
				e.spot = interest.Spot{P: [3]float64{(rng.Float64() - 0.5) * spread, rng.Float64(), (rng.Float64() - 0.5) * spread}, HasP: true}
			}
			switch rng.IntN(8) {
			case 0:
				e.from = ls
			case 1, 2:
				e.from = other
			}
			log = append(log, e)
		}
		var boxes []peer.Box
		for range 1 + rng.IntN(3) {
			c := [3]float64{(rng.Float64() - 0.5) * 40, 0, (rng.Float64() - 0.5) * 40}
			r := []float64{10, 25, 200, 10000}[rng.IntN(4)]
			boxes = append(boxes, peer.Box{Min: [3]float64{c[0] - r, -r, c[2] - r}, Max: [3]float64{c[0] + r, r, c[2] + r}})
		}
		reg := &region{Region: interest.Region{Wants: interest.Wants{Boxes: boxes, HasBoxes: true}}}
		if rng.IntN(10) == 0 {
			reg.Rooms = map[string]bool{"hall": true}
		}
		ls.region = reg
		sp := interest.Space[*linkState]{Grid: interest.Grid{Size: 32}}
		sp.Activate(func(func(uint32, string, gameworld.Properties) bool) {})
		sp.Register(ls, &reg.Region)
		var sub []int
		for i := range log {
			if reg.Wide() || rng.IntN(3) > 0 {
				sub = append(sub, i)
			}
		}
		n.fan.log = log
		n.fan.near.build(log, near)
		got, ok := n.fan.near.subOf(ls, sub)
		fast[ok]++
		// By column exactly when no room and one box holds every placed
		// update (so that none is hidden).
		oneBox := slices.ContainsFunc(boxes, func(b peer.Box) bool {
			return !slices.ContainsFunc(log, func(e logEntry) bool {
				return e.rec.Type == gameworld.Update && e.spot.HasP && !b.Contains(e.spot.P, 0)
			})
		})
		if ok != (oneBox && reg.Rooms == nil) {
			t.Fatalf("round %d: by column %v, one box holds every placed update %v, rooms %v", round, ok, oneBox, reg.Rooms != nil)
		}
		if !ok {
			continue
		}
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("round %d: not in log order: %v", round, got)
		}
		k := 0
		for _, j := range sub {
			if k < len(got) && got[k] == j {
				k++
				continue
			}
			if !n.waitsForSchedule(ls, j) {
				e := log[j]
				t.Fatalf("round %d (wide %v): entry %d (%s at %v, own %v) left out, yet it cannot wait", round, reg.Wide(), j, e.rec.Type, e.spot, e.from == ls)
			}
		}
		if k != len(got) {
			t.Fatalf("round %d: takes entries that are not its own: %v of %v", round, got, sub)
		}
		n.fan.near.built = false
	}
	if fast[true] < 50 || fast[false] < 50 {
		t.Fatalf("too few rounds of one path: %v", fast)
	}
}
