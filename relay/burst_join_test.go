package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// TestJoinDuringBurst: peers join a proxy while a burst of 20,000 objects
// arrives at its server, some on slow links, and the burst's sender leaves
// while their refresh answers are still being paced out. Every peer ends
// without a single object of the burst.
func TestJoinDuringBurst(t *testing.T) {
	for _, delay := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond} {
		t.Run(fmt.Sprint("join after ", delay), func(t *testing.T) {
			srv, url := startNode(t, relay.Options{})
			proxy, purl := startProxy(t, url, relay.Options{})
			b := wiretest.Dial(t, url, "burst-AAAAAAAA-AAAAAAAA", wiretest.Options{})
			b.Wait("asked", 5*time.Second, func(map[string]wiretest.Object) bool { return true })
			time.Sleep(50 * time.Millisecond)
			recs := make([]map[string]any, 0, 20000)
			for i := range 20000 {
				recs = append(recs, wiretest.Add(fmt.Sprintf("b-%d", i), b.ID, map[string]any{"i": i}))
			}
			for i := 0; i < len(recs); i += 5000 {
				b.Change(recs[i : i+5000]...)
			}
			time.Sleep(delay)
			var peers []*wiretest.Peer
			for i := range 6 {
				opts := wiretest.Options{Forget: true}
				if i%2 == 1 {
					opts.ReadDelay = 20 * time.Millisecond
				}
				id := fmt.Sprintf("client-%08d-joinburs", i)
				opts.Owned = []map[string]any{wiretest.Add("obj-"+id, id, map[string]any{"n": i})}
				at := purl
				if i%3 == 2 {
					at = url
				}
				peers = append(peers, wiretest.Dial(t, at, id, opts))
			}
			time.Sleep(time.Duration(len(peers)) * 30 * time.Millisecond)
			b.Close()
			deadline := time.Now().Add(20 * time.Second)
			for srv.World().Len() != len(peers) || proxy.World().Len() != len(peers) {
				if time.Now().After(deadline) {
					var sample []string
					proxy.World().Range(func(o gameworld.Object) bool {
						if len(sample) < 5 {
							sample = append(sample, o.ID+" of "+o.Owner)
						}
						return true
					})
					t.Fatalf("after 20 s the server holds %d objects and the proxy %d, want %d each (the proxy: %v)", srv.World().Len(), proxy.World().Len(), len(peers), sample)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, p := range peers {
				p.Wait("the burst gone and the others seen", 30*time.Second, func(m map[string]wiretest.Object) bool {
					return len(m) == len(peers)-1
				})
				p.CheckClean()
			}
		})
	}
}
