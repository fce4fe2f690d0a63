package relay_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/relay"
)

// TestOffersKeepOrder: a tick's log is offered to most links outside the
// node's lock while the next changes apply (unlocked.go). Sixteen 2016
// peers — half of them with a region, so both kinds of offer run — each
// write their object's counter 300 times as fast as they can, while new
// peers join: every peer must see every other's counter only go up, and
// end with the node's world.
func TestOffersKeepOrder(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond})
	const peers, writes = 16, 300
	ps := make([]*wiretest.Peer, peers)
	for i := range ps {
		var extra map[string]any
		if i%2 == 1 {
			extra = map[string]any{"interest": map[string]any{"min": []int{-100, -100, -100}, "max": []int{100, 100, 100}}}
		}
		id := fmt.Sprintf("client-%08d-ordered0", i)
		ps[i] = wiretest.Dial(t, url, id, wiretest.Options{Extra: extra})
		waitFor(t, id+" asked", 5*time.Second, func() bool { return len(ps[i].Messages()) > 0 })
		ps[i].Change(wiretest.Add("obj-"+id, id, map[string]any{"n": 0, "position": []int{i, 0, 0}}))
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			for k := 1; k <= writes; k++ {
				p.Change(wiretest.Update("obj-"+p.ID, p.ID, map[string]any{"n": k, "position": []int{i, 0, k % 50}}))
			}
		})
	}
	// Peers joining meanwhile take refreshes, which go under the lock.
	late := make([]*wiretest.Peer, 4)
	for i := range late {
		late[i] = wiretest.Dial(t, url, fmt.Sprintf("client-%08d-latejoin", i), wiretest.Options{})
	}
	wg.Wait()
	for _, p := range append(ps, late...) {
		defer func() {
			if t.Failed() {
				objs := p.Objects()
				for _, q := range ps {
					t.Logf("%s: %s n=%s; node %v", p.ID, q.ID, objs["obj-"+q.ID].Properties["n"], func() string { o, _ := n.World().Get("obj-" + q.ID); v, _ := o.Properties.Get("n"); return string(v) }())
				}
			}
		}()
		waitFor(t, p.ID+" sees every last value", 20*time.Second, func() bool {
			objs := p.Objects()
			for _, q := range ps {
				if q == p {
					continue // (its own, which it is never sent)
				}
				if o, ok := objs["obj-"+q.ID]; !ok || string(o.Properties["n"]) != fmt.Sprint(writes) {
					return false
				}
			}
			return true
		})
		// Each other's counter, in the order this peer was sent it.
		last := map[string]int{}
		for _, m := range p.Messages() {
			if m.Type != "worldChange" {
				continue
			}
			var wc struct {
				Changes []struct {
					ID         string
					Properties map[string]json.RawMessage
				}
			}
			if err := json.Unmarshal(m.Data, &wc); err != nil {
				t.Fatal(err)
			}
			for _, c := range wc.Changes {
				v, ok := c.Properties["n"]
				if !ok {
					continue
				}
				var k int
				json.Unmarshal(v, &k)
				if k < last[c.ID] {
					t.Fatalf("%s was sent %s's counter %d after %d", p.ID, c.ID, k, last[c.ID])
				}
				last[c.ID] = k
			}
		}
		objs := p.Objects()
		for _, o := range n.World().Objects() {
			if o.Owner == p.ID {
				continue
			}
			got, ok := objs[o.ID]
			if !ok || got.Owner != o.Owner {
				t.Fatalf("%s holds %s as %+v, the node owned by %s", p.ID, o.ID, got, o.Owner)
			}
			for k, v := range o.Properties.All() {
				if string(got.Properties[k]) != string(v) {
					t.Errorf("%s holds %s.%s = %s, the node %s", p.ID, o.ID, k, got.Properties[k], v)
				}
			}
		}
		p.CheckClean()
	}
}
