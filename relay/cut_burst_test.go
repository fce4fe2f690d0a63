package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestUpstreamCutDuringBurst: a proxy's upstream connection breaks (no
// close frame) again and again while a client behind the proxy sends
// bursts, updates and removes, and other clients come and go on both
// sides. The proxy reconnects each time with its resume tokens. At the
// end the server and the proxy hold the same world, every client holds
// it too, and anti-entropy repaired nothing.
func TestUpstreamCutDuringBurst(t *testing.T) {
	s, urlS := startNode(t, relay.Options{ReclaimGrace: 3 * time.Second})
	wire := newCutter(t, strings.TrimSuffix(strings.TrimPrefix(urlS, "ws://"), "/ws"))
	p, urlP := startProxy(t, wire.url(), relay.Options{ReclaimGrace: 3 * time.Second})
	burster := wiretest.Dial(t, urlP, "burst-BBBBBBBB-BBBBBBBB", wiretest.Options{})
	watchS := wiretest.Dial(t, urlS, "watch-SSSSSSSS-SSSSSSSS", wiretest.Options{Forget: true})
	watchP := wiretest.Dial(t, urlP, "watch-PPPPPPPP-PPPPPPPP", wiretest.Options{Forget: true, ReadDelay: time.Millisecond})
	waitFor(t, "the proxy's resume tokens", 5*time.Second, func() bool {
		return p.HasResumeToken(burster.ID)
	})
	next := 0
	for round := range 6 {
		recs := make([]map[string]any, 0, 3000)
		for range 3000 {
			recs = append(recs, wiretest.Add(fmt.Sprintf("b-%d", next), burster.ID, map[string]any{"round": round}))
			next++
		}
		for i := 0; i < len(recs); i += 1000 {
			burster.Change(recs[i : i+1000]...)
		}
		if round%2 == 1 {
			wire.cut() // while the burst is on its way
		}
		// Updates and removes of earlier objects, and a visitor on each side.
		var more []map[string]any
		for i := max(0, next-4500); i < next-3000; i += 7 {
			if i%2 == 0 {
				more = append(more, wiretest.Remove(fmt.Sprintf("b-%d", i), burster.ID))
			} else {
				more = append(more, wiretest.Update(fmt.Sprintf("b-%d", i), burster.ID, map[string]any{"touched": round}))
			}
		}
		if len(more) > 0 {
			burster.Change(more...)
		}
		for side, url := range []string{urlS, urlP} {
			id := fmt.Sprintf("visit-%08d-%08d", round, side)
			v := wiretest.Dial(t, url, id, wiretest.Options{Owned: []map[string]any{wiretest.Add("v-"+id, id, map[string]any{"r": round})}})
			if round%3 == 0 {
				v.Close()
			}
		}
		if round%2 == 0 {
			wire.cut()
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, "the proxy connected", 10*time.Second, func() bool { return upstreamConnected(p) })
	deadline := time.Now().Add(30 * time.Second)
	for d := worldDiff(p.World(), s.World()); d != ""; d = worldDiff(p.World(), s.World()) {
		if time.Now().After(deadline) {
			if len(d) > 300 {
				d = d[:300]
			}
			t.Fatalf("after 30 s the proxy (%d objects) and the server (%d) differ: %s; repairs: proxy %v, server %v; the burster's chain at the server: %v", p.World().Len(), s.World().Len(), d, p.Repairs(), s.Repairs(), chainOf(s, burster.ID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range []*wiretest.Peer{watchS, watchP, burster} {
		var ref = s
		if w != watchS {
			ref = p
		}
		w.Wait("the peer holds its node's world", 30*time.Second, func(m map[string]wiretest.Object) bool {
			return len(m)+ownCount(ref, w.ID) == ref.World().Len()
		})
	}
	// A last round of digests on every link, after everything settled.
	time.Sleep(3 * testDigestInterval)
	if d := worldDiff(p.World(), s.World()); d != "" {
		t.Fatalf("server and proxy differ: %s", d)
	}
	watchS.CheckClean()
	watchP.CheckClean()
}

// ownCount is how many objects of the world n holds are owned by id.
func ownCount(n *relay.Node, id string) int {
	k := 0
	for _, o := range n.World().Objects() {
		if o.Owner == id {
			k++
		}
	}
	return k
}
