package relay_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestObserverFlipsAcrossMesh: a bridge's observer is all member a
// serves, so its flips between nothing and everything change what a asks
// of member b. On b, 2016 peers add, update, remove and add again objects
// without a position (the same ids, over and over), and bursts of
// positioned objects come and go. At the end the observer holds exactly
// a's world, and a holds b's.
func TestObserverFlipsAcrossMesh(t *testing.T) {
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			nodes := startMeshWith(t, 2, cluster.Options{}, relay.Options{Tick: 2 * time.Millisecond})
			a, b := nodes[0], nodes[1]
			view := newView()
			obs, err := a.node.Attach(relay.AttachOptions{Receiver: view})
			if err != nil {
				t.Fatal(err)
			}
			obs.SetInterest(nil, true)
			r := rand.New(rand.NewPCG(seed, 11))
			peers := make([]*wiretest.Peer, 3)
			objs := make([]int, len(peers))
			for i := range peers {
				peers[i] = wiretest.Dial(t, b.url, fmt.Sprintf("client-%08d-%08d", i, seed), wiretest.Options{})
			}
			var burst *wiretest.Peer
			for step := range 1500 {
				i := r.IntN(len(peers))
				p := peers[i]
				switch k := r.IntN(100); {
				case k < 30 && objs[i] > 0:
					p.Change(wiretest.Update(fmt.Sprintf("obj-%s-%d", p.ID, r.IntN(objs[i])), p.ID, map[string]any{"n": step}))
				case k < 55 && objs[i] < 3:
					p.Change(wiretest.Add(fmt.Sprintf("obj-%s-%d", p.ID, objs[i]), p.ID, map[string]any{"n": step}))
					objs[i]++
				case k < 80 && objs[i] > 0:
					objs[i]--
					p.Change(wiretest.Remove(fmt.Sprintf("obj-%s-%d", p.ID, objs[i]), p.ID))
				case k < 92:
					obs.SetInterest(nil, r.IntN(2) == 0) // nothing, or everything
				case k < 94 && burst == nil:
					burst = wiretest.Dial(t, b.url, fmt.Sprintf("burst-%08d-%08d", step, seed), wiretest.Options{Forget: true})
					burst.Wait("asked", 5*time.Second, func(map[string]wiretest.Object) bool { return true })
					recs := make([]map[string]any, 0, 3000)
					for j := range 3000 {
						recs = append(recs, wiretest.Add(fmt.Sprintf("b-%d-%d", step, j), burst.ID, map[string]any{"n": j, "position": []int{j % 10, 0, j / 10}}))
					}
					burst.Change(recs...)
				case k < 96 && burst != nil:
					burst.Close()
					burst = nil
				}
				if step%20 == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
			if burst != nil {
				burst.Close()
			}
			obs.SetInterest(nil, false)
			var diff string
			defer func() {
				if t.Failed() {
					t.Logf("the last difference: %s", diff)
				}
			}()
			waitFor(t, "the observer holds a's world, and a b's", 20*time.Second, func() bool {
				diff = worldDiff(b.node.World(), a.node.World())
				if diff != "" {
					diff = "a and b: " + diff
					return false
				}
				if d := view.diff(a.node.World()); d != "" {
					diff = "the observer: " + d
				}
				return diff == ""
			})
		})
	}
}
