package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
)

// BenchmarkDrain: member A of a mesh of two holds 200 Go clients, each
// owning an object a watcher on B sees. "drain": A drains, and the clients,
// which know A alone, follow it to B. "stop", the baseline: A just closes
// (as a stop did before draining), and the clients, which know B as their
// failover, go there by themselves. The metrics are how long until every
// client is at B (move-ms) and how many of their objects blinked out for
// the watcher (blinks).
//
//	go test ./relay -run '^$' -bench Drain -benchtime 1x
func BenchmarkDrain(b *testing.B) {
	for _, drain := range []bool{true, false} {
		name := "drain"
		if !drain {
			name = "stop"
		}
		b.Run(name, func(b *testing.B) { benchmarkMove(b, drain) })
	}
}

func benchmarkMove(b *testing.B, drain bool) {
	const clients = 200
	for range b.N {
		b.StopTimer()
		nodes := startMeshWith(b, 2, cluster.Options{}, relay.Options{Tick: 20 * time.Millisecond})
		a, bn := nodes[0], nodes[1]
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var ids []string
		var cs []*client.Client
		for i := range clients {
			opts := client.Options{Prefix: "mover", Tick: 20 * time.Millisecond, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
			if !drain {
				opts.FailoverURLs = []string{bn.url}
			}
			c, err := client.Dial(ctx, a.url, opts)
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
			id := fmt.Sprintf("obj-%d", i)
			if err := c.CreateWithID(id, map[string]any{"n": i}); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		watcher := wiretest.Dial(b, bn.url, "watch-AAAAAAAA-AAAAAAAA", wiretest.Options{})
		watcher.Wait("every object", 30*time.Second, func(m map[string]wiretest.Object) bool { return len(m) >= clients })
		stop := wiretest.WatchGone(ids, func(id string) bool { _, ok := watcher.Objects()[id]; return ok })
		b.StartTimer()
		start := time.Now()
		if drain {
			if err := a.node.Drain(ctx, relay.DrainOptions{Grace: 30 * time.Second}); err != nil {
				b.Fatal(err)
			}
		} else {
			a.node.Close(ctx)
		}
		for _, c := range cs {
			for chainOf(bn.node, c.Identifier()) == nil && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
		}
		took := time.Since(start)
		b.StopTimer()
		time.Sleep(500 * time.Millisecond)
		gone := stop()
		b.ReportMetric(float64(took.Milliseconds()), "move-ms")
		b.ReportMetric(float64(len(gone)), "blinks")
		for _, c := range cs {
			c.Close()
		}
		cancel()
	}
}
