package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// TestInterestFlipsDuringBursts: a watcher's region flips between nothing
// and everything (as a node's does toward its mesh members and upstream
// when its last local client leaves and another comes) while bursts of
// positioned objects arrive and leave. At the end the watcher holds the
// node's world, and neither side repaired anything.
func TestInterestFlipsDuringBursts(t *testing.T) {
	s, url := startNode(t, relay.Options{Tick: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := dialTick(t, ctx, url, 10*time.Millisecond)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for nothing := true; ; nothing = !nothing {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(5+rand.IntN(40)) * time.Millisecond):
			}
			if nothing {
				w.SetInterest([]peer.Box{})
			} else {
				w.SetInterest(nil)
			}
		}
	}()
	for round := range 4 {
		b := sendBurst(t, url, fmt.Sprintf("burst-%08d-flipping", round), 10000)
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		if round%2 == 0 {
			b.Close()
		}
		// (odd rounds stay: their objects are part of the end state)
	}
	close(stop)
	wg.Wait()
	w.SetInterest(nil)
	same := func() string {
		want := map[string]gameworld.Object{}
		s.World().Range(func(o gameworld.Object) bool {
			if o.Owner != w.Identifier() {
				want[o.ID] = o
			}
			return true
		})
		got := map[string]gameworld.Object{}
		w.World().Range(func(o gameworld.Object) bool {
			if o.Owner != w.Identifier() {
				got[o.ID] = o
			}
			return true
		})
		for id, o := range want {
			g, ok := got[id]
			if !ok {
				return fmt.Sprintf("the watcher lacks %s (%d of %d)", id, len(got), len(want))
			}
			if g.Digest != o.Digest {
				return fmt.Sprintf("the watcher's %s differs", id)
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				return fmt.Sprintf("the watcher holds %s, which the node does not (%d of %d)", id, len(got), len(want))
			}
		}
		return ""
	}
	var diff string
	if !await(30*time.Second, func() bool { diff = same(); return diff == "" }) {
		var links []string
		for _, l := range s.Links() {
			links = append(links, fmt.Sprintf("%s %s interest=%v queued=%d", l.Kind, l.Identifier, l.Interest, l.Queued))
		}
		t.Fatalf("the watcher does not hold the node's world: %s; the node's links: %v", diff, links)
	}
	time.Sleep(3 * testDigestInterval)
	if r := w.Node().Repairs(); r[relay.RepairMissing]+r[relay.RepairStale]+r[relay.RepairExtra] > 0 {
		t.Errorf("the watcher repaired %v: a divergence", r)
	}
}

// sendBurst connects a peer that forgets what it sends, as id, and sends n
// adds of positioned objects in messages of 5,000. The caller closes it.
func sendBurst(t *testing.T, url, id string, n int) *wiretest.Peer {
	t.Helper()
	p := wiretest.Dial(t, url, id, wiretest.Options{Forget: true})
	p.Wait("asked", 5*time.Second, func(map[string]wiretest.Object) bool { return true })
	for start := 0; start < n; start += 5000 {
		recs := make([]map[string]any, 0, 5000)
		for i := start; i < min(n, start+5000); i++ {
			recs = append(recs, wiretest.Add(fmt.Sprintf("%s-%d", id, i), id, map[string]any{"n": i, "position": []int{i % 100, 0, i / 100}}))
		}
		p.Change(recs...)
	}
	return p
}
