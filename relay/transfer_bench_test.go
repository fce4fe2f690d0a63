package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
)

// BenchmarkTransfer: two clients pass an object back and forth with
// TakeOwnership, every node at tick 0; each op is one transfer, asked,
// decided, answered and seen by the other client. The askers sit on one
// server node; on a server and a proxy below it (the server decides, the
// proxy passes requests and answers); and on two members of a 3-node mesh
// (the deciding member answers once the others have acknowledged).
//
//	go test ./relay -run '^$' -bench Transfer
func BenchmarkTransfer(b *testing.B) {
	b.Run("one node", func(b *testing.B) {
		_, url := startNode(b, relay.Options{Tick: -1})
		benchTransfers(b, url, url)
	})
	b.Run("through a proxy", func(b *testing.B) {
		_, url := startNode(b, relay.Options{Tick: -1})
		p, purl := startProxy(b, url, relay.Options{Tick: -1})
		waitFor(b, "the proxy's upstream", 5*time.Second, func() bool { return upstreamConnected(p) })
		benchTransfers(b, url, purl)
	})
	b.Run("across a mesh", func(b *testing.B) {
		nodes := startMeshWith(b, 3, cluster.Options{}, relay.Options{Tick: -1})
		benchTransfers(b, nodes[0].url, nodes[1].url)
	})
}

func benchTransfers(b *testing.B, urlX, urlY string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(url, prefix string) *client.Client {
		c, err := client.Dial(ctx, url, client.Options{Prefix: prefix, Tick: -1, Logger: testLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	x, y := dial(urlX, "x"), dial(urlY, "y")
	ball, _ := x.Create(map[string]any{"transferable": true})
	waitFor(b, "y sees the ball", 5*time.Second, func() bool { _, ok := y.World().Get(ball); return ok })
	// Each client signals when it sees the ball go to the other: no
	// polling, whose sleeps would be what is measured.
	seen := map[*client.Client]chan string{x: make(chan string, 16), y: make(chan string, 16)}
	for c, ch := range seen {
		c.Subscribe(func(e client.Event) {
			if e.ID == ball && e.Type == gameworld.Transfer {
				ch <- e.Owner
			}
		})
	}
	clients := []*client.Client{y, x}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		c, other := clients[i%2], clients[(i+1)%2]
		if err := c.TakeOwnership(ctx, ball); err != nil {
			b.Fatal(err)
		}
		for owner := ""; owner != c.Identifier(); {
			select {
			case owner = <-seen[other]:
			case <-ctx.Done():
				b.Fatal("the other client never saw the transfer")
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/transfer")
}
