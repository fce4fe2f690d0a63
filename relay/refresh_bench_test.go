package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
)

// BenchmarkJoinLatency: three clients share a node holding 99,000 objects
// when newcomers join (each is sent the whole world); right after each
// joins, one of the three adds an object. Reported: the time until another
// of them sees it (ms; the target is about one tick, 50 ms), and until the
// newcomer holds the world (join-ms). A big world's refresh answer goes a
// slice at a time, so that others' changes are not held up behind it.
//
//	go test ./relay -run '^$' -bench JoinLatency -benchtime 5x
func BenchmarkJoinLatency(b *testing.B) {
	const objects = 99_000
	_, url := startNode(b, relay.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var watchers []*client.Client
	for range 3 {
		c, err := client.Dial(ctx, url, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		watchers = append(watchers, c)
	}
	changes := make([]gameworld.Change, 0, objects)
	for k := range objects {
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("big-%06d", k),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": []byte(fmt.Sprintf("[%d,1,2]", k)), "n": []byte(fmt.Sprint(k))})})
	}
	if _, err := watchers[2].Node().Apply(changes); err != nil {
		b.Fatal(err)
	}
	for _, w := range watchers {
		waitFor(b, "the world everywhere", time.Minute, func() bool { return w.World().Len() == objects })
	}
	var total, worst, join time.Duration
	b.ResetTimer()
	for i := range b.N {
		probe := fmt.Sprintf("probe-%d", i)
		t0 := time.Now()
		newcomer, err := client.Dial(ctx, url, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // its refresh under way
		d := probeLatency(b, watchers[0], watchers[1], probe)
		waitFor(b, "the newcomer holds the world", time.Minute, func() bool { return newcomer.World().Len() >= objects })
		join += time.Since(t0)
		newcomer.Close()
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
	b.ReportMetric(float64(join.Milliseconds())/float64(b.N), "join-ms")
}
