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

// BenchmarkDepartureLatency: a client holding 99,000 objects leaves a node
// that four other clients watch; right after, one of them adds an object.
// Reported: the time until another sees it (ms; the target is about one
// tick, 50 ms, plus the hop), and until every watcher has seen the
// 99,000 removals (removal-ms). The node removes a departed world's
// objects a slice at a time, so that other peers' changes overtake them.
//
//	go test ./relay -run '^$' -bench DepartureLatency -benchtime 5x
func BenchmarkDepartureLatency(b *testing.B) {
	const objects = 99_000
	var total, worst, removal time.Duration
	b.StopTimer()
	for i := range b.N {
		_, url := startNode(b, relay.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		watchers := make([]*client.Client, 4)
		for j := range watchers {
			c, err := client.Dial(ctx, url, client.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			watchers[j] = c
		}
		flooder, err := client.Dial(ctx, url, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		changes := make([]gameworld.Change, 0, objects)
		for k := range objects {
			changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("flood-%d-%06d", i, k),
				Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": []byte(fmt.Sprintf("[%d,1,2]", k)), "n": []byte(fmt.Sprint(k))})})
		}
		if _, err := flooder.Node().Apply(changes); err != nil {
			b.Fatal(err)
		}
		for _, w := range watchers {
			waitFor(b, "the flood everywhere", time.Minute, func() bool { return w.World().Len() == objects })
		}
		probe := fmt.Sprintf("probe-%d", i)
		b.StartTimer()
		t0 := time.Now()
		flooder.Close()
		time.Sleep(5 * time.Millisecond) // the close reaches the node
		d := probeLatency(b, watchers[0], watchers[1], probe)
		for _, w := range watchers {
			waitFor(b, "the removals everywhere", time.Minute, func() bool { return w.World().Len() == 1 })
		}
		removal += time.Since(t0)
		b.StopTimer()
		total += d
		worst = max(worst, d)
		b.Logf("probe after %v", d.Round(time.Millisecond))
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
	b.ReportMetric(float64(removal.Milliseconds())/float64(b.N), "removal-ms")
}

// probeLatency has maker create the object probe and returns how long
// until watcher sees it.
func probeLatency(b *testing.B, maker, watcher *client.Client, probe string) time.Duration {
	b.Helper()
	seen := make(chan time.Time, 1)
	cancel := watcher.Subscribe(func(e client.Event) {
		if e.ID == probe && e.Type == gameworld.Add {
			select {
			case seen <- time.Now():
			default:
			}
		}
	})
	defer cancel()
	t1 := time.Now()
	if err := maker.CreateWithID(probe, map[string]any{"n": 1}); err != nil {
		b.Fatal(err)
	}
	select {
	case at := <-seen:
		return at.Sub(t1)
	case <-time.After(time.Minute):
		b.Fatal("the probe did not arrive within a minute")
	}
	return 0
}
