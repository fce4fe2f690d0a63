package relay_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// TestObserverFlipsWhileTheWorldChurns: a bridge's observer flips its
// region between nothing and everything (its last client leaves, another
// comes) while writers add, update and remove objects with and without a
// position, leave and come back, and bursts arrive and leave. At the end
// the observer holds exactly the world.
func TestObserverFlipsWhileTheWorldChurns(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			n, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
			view := newView()
			obs, err := n.Attach(relay.AttachOptions{Receiver: view})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 7))
			writers := make([]*relay.Attachment, 3)
			attach := func(i int) {
				a, err := n.Attach(relay.AttachOptions{Identifier: fmt.Sprintf("writer-%08d-%08d", i, r.IntN(1e8))})
				if err != nil {
					t.Fatal(err)
				}
				writers[i] = a
			}
			for i := range writers {
				attach(i)
			}
			props := func(step int) gameworld.Properties {
				p := gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(step))})
				if r.IntN(2) == 0 {
					p = p.With("position", json.RawMessage(fmt.Sprintf("[%d,0,0]", r.IntN(10))))
				}
				return p
			}
			var burst *wiretest.Peer
			for step := range 3000 {
				w := writers[r.IntN(len(writers))]
				id := fmt.Sprintf("o-%d-%d", r.IntN(3), r.IntN(20))
				switch k := r.IntN(100); {
				case k < 40:
					w.Apply([]gameworld.Change{{Type: gameworld.Add, ID: id, Properties: props(step)}})
				case k < 70:
					w.Apply([]gameworld.Change{{Type: gameworld.Update, ID: id, Properties: props(step)}})
				case k < 85:
					w.Apply([]gameworld.Change{{Type: gameworld.Remove, ID: id}})
				case k < 93:
					if r.IntN(2) == 0 {
						obs.SetInterest(nil, true) // nothing
					} else {
						obs.SetInterest(nil, false) // everything
					}
				case k < 95:
					i := r.IntN(len(writers))
					writers[i].Detach()
					attach(i)
				case k < 96 && burst == nil:
					burst = wiretest.Dial(t, url, fmt.Sprintf("burst-%08d-%08d", step, seed), wiretest.Options{Forget: true})
					burst.Wait("asked", 5*time.Second, func(map[string]wiretest.Object) bool { return true })
					recs := make([]map[string]any, 0, 2000)
					for j := range 2000 {
						recs = append(recs, wiretest.Add(fmt.Sprintf("b-%d-%d", step, j), burst.ID, map[string]any{"position": []int{j % 10, 0, 0}}))
					}
					burst.Change(recs...)
				case k < 97 && burst != nil:
					burst.Close()
					burst = nil
				}
				if step%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if burst != nil {
				burst.Close()
			}
			obs.SetInterest(nil, false)
			var diff string
			defer func() {
				if t.Failed() {
					t.Logf("the observer's last difference: %s", diff)
				}
			}()
			waitFor(t, "the observer holds the world", 10*time.Second, func() bool {
				diff = view.diff(n.World())
				return diff == ""
			})
		})
	}
}
