package relay

import (
	"context"
	"testing"
	"time"
)

// BenchmarkTransfer: two clients of one server node (tick 0) pass an object
// back and forth with TakeOwnership; each op is one transfer, asked,
// granted, answered and seen by the other client.
//
//	go test ./relay -run '^$' -bench Transfer
func BenchmarkTransfer(b *testing.B) {
	_, url := startNode(b, Options{Tick: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(prefix string) *Client {
		c, err := Dial(ctx, url, ClientOptions{Prefix: prefix, Tick: -1, Logger: testLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	x, y := dial("x"), dial("y")
	ball, _ := x.Create(map[string]any{"transferable": true})
	waitFor(b, "y sees the ball", 5*time.Second, func() bool { _, ok := y.World().Get(ball); return ok })
	clients := []*Client{y, x}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		c, other := clients[i%2], clients[(i+1)%2]
		if err := c.TakeOwnership(ctx, ball); err != nil {
			b.Fatal(err)
		}
		for {
			if o, _ := other.World().Get(ball); o.Owner == c.Identifier() {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/transfer")
}
