package relay_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// TestMeshInterestUnderLoad: a mesh of three nodes, every core kept busy.
// Watchers on one node look at the world through two boxes each, and move
// them; objects owned on the other nodes stand still in and out of the
// boxes or walk across them. Whatever the order in which regions, their
// unions and the objects' changes cross the mesh, every watcher ends up
// seeing exactly the objects inside its boxes, where they are, and none
// beyond them and their margin.
func TestMeshInterestUnderLoad(t *testing.T) {
	nodes := startMeshWith(t, 3, cluster.Options{}, relay.Options{Tick: 5 * time.Millisecond})
	stop := wiretest.BusyCores()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(n int, prefix string, boxes []peer.Box) *client.Client {
		c, err := client.Dial(ctx, nodes[n].url, client.Options{Prefix: prefix, Tick: 5 * time.Millisecond, Interest: boxes, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	at := func(x float64) map[string]any { return map[string]any{"position": []float64{x, 0, 0}} }
	// Objects every 10 units from -200 to 590, on nodes 1 and 2.
	owners := []*client.Client{dial(1, "west", nil), dial(2, "east", nil)}
	pos := map[string]float64{}
	var mu sync.Mutex
	for i := range 80 {
		x := float64(i*10 - 200)
		id := fmt.Sprintf("still-%03d", i)
		if err := owners[i%2].CreateWithID(id, at(x)); err != nil {
			t.Fatal(err)
		}
		pos[id] = x
	}
	// Walkers go back and forth across the whole range.
	walkers := []string{"walker-a", "walker-b", "walker-c", "walker-d"}
	for i, id := range walkers {
		owners[i%2].CreateWithID(id, at(-200))
		pos[id] = -200
	}
	walking := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for step := 0; ; step++ {
			select {
			case <-walking:
				return
			case <-time.After(3 * time.Millisecond):
			}
			for i, id := range walkers {
				x := float64((step*(7+i*3))%1600 - 200)
				if x > 600 {
					x = 1400 - x // and back
				}
				mu.Lock()
				pos[id] = x
				mu.Unlock()
				owners[i%2].Set(id, at(x))
			}
		}
	}()

	const margin = relay.DefaultInterestMargin
	regions := func(round, w int) []peer.Box {
		// Two boxes, 40 wide, far apart, in a new place each round.
		a := float64((round*37+w*53)%300 - 150)
		b := a + 250
		return []peer.Box{box(a, -5, -5, a+40, 5, 5), box(b, -5, -5, b+40, 5, 5)}
	}
	watchers := []*client.Client{dial(0, "watcher0", regions(0, 0)), dial(0, "watcher1", regions(0, 1))}
	for round := range 12 {
		for w, c := range watchers {
			c.SetInterest(regions(round, w))
		}
		if round == 11 {
			close(walking)
			wg.Wait()
		}
		for w, c := range watchers {
			boxes := regions(round, w)
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				var missing, extra, stale []string
				for id, x := range pos {
					o, seen := c.World().Get(id)
					inside := interest.Contains(boxes, [3]float64{x, 0, 0}, 0)
					near := interest.Contains(boxes, [3]float64{x, 0, 0}, margin)
					switch {
					case inside && !seen:
						_, in0 := nodes[0].node.World().Get(id)
						missing = append(missing, fmt.Sprintf("%s@%g (node 0 has it: %v)", id, x, in0))
					case !near && seen:
						n0, in0 := nodes[0].node.World().Get(id)
						extra = append(extra, fmt.Sprintf("%s@%g (watcher has %s, node 0 has %v %s)", id, x, o.Properties.Value("position"), in0, n0.Properties.Value("position")))
					case seen && round == 11 && string(o.Properties.Value("position")) != fmt.Sprintf("[%g,0,0]", x):
						stale = append(stale, fmt.Sprintf("%s@%g has %s", id, x, o.Properties.Value("position")))
					}
				}
				mu.Unlock()
				if len(missing)+len(extra)+len(stale) == 0 {
					break
				}
				// While walkers walk, one may be caught between a step and
				// its delivery: only stragglers that stay count.
				if time.Now().After(deadline) {
					sort.Strings(missing)
					t.Fatalf("round %d, watcher %d with boxes %v: missing %s; extra %s; stale %s", round, w, boxes,
						strings.Join(missing, " "), strings.Join(extra, " "), strings.Join(stale, " "))
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}
