package test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// BenchmarkRecovery: a peer sends a burst of N records (one message of N
// adds) to a node; right after, a new client connects at the far end of
// the deployment and another client, at the burst's node, adds an object.
// Reported: the time until the new client sees that object (ms), for a
// single node, the far end of a proxy chain of depth 2, and another member
// of a 3-member mesh, at N = 1,000, 10,000 and 100,000. The target is
// 100 ms plus one tick (50 ms) per hop: the burst must not hold up other
// peers' changes.
//
//	go test ./test -run '^$' -bench Recovery -benchtime 1x
func BenchmarkRecovery(b *testing.B) {
	for _, name := range []string{"node", "chain", "mesh"} {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				var total time.Duration
				for i := range b.N {
					tp := startTopo(b, name)
					maker := wiretest.Dial(b, tp.entry.URL(), fmt.Sprintf("maker-%08d-%08d", i, n), wiretest.Options{})
					burster := wiretest.Dial(b, tp.entry.URL(), fmt.Sprintf("burst-%08d-%08d", i, n), wiretest.Options{})
					waitUntil(b, "handshakes", 5*time.Second, func() bool { return len(maker.Messages()) > 1 && len(burster.Messages()) > 1 })
					recs := make([]map[string]any, n)
					for j := range recs {
						recs[j] = wiretest.Add(fmt.Sprintf("b%08d-%08d", j, i), burster.ID, map[string]any{"i": j, "position": []int{j % 300, 0, j / 300}})
					}
					burster.Change(recs...)
					t0 := time.Now()
					probe := fmt.Sprintf("probe%03d-%08d", i, n)
					seen := watchFor(b, tp.far.URL(), probe)
					maker.Change(wiretest.Add(probe, maker.ID, map[string]any{"probe": true}))
					select {
					case <-seen:
					case <-time.After(60 * time.Second):
						b.Fatalf("%s: the probe did not arrive within 60 s", b.Name())
					}
					d := time.Since(t0)
					tp.stop()
					total += d
					b.Logf("%s: %v (target %v)", b.Name(), d.Round(time.Millisecond), 100*time.Millisecond+time.Duration(tp.hops)*50*time.Millisecond)
				}
				b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
			})
		}
	}
}

var watchers atomic.Int64
