package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"
)

// BenchmarkCrowdJoins: a crowd arriving. 500 clients in one area, each
// with an interest region over all of it and priority by distance, move
// their object at 5 Hz while 500 more join the same way, all at once;
// joins/s is how many the node admits a second (metadata handled, refresh
// asked for), and took-s how long the last one waited.
//
//	go test ./relay -run '^$' -bench CrowdJoins -benchtime 3x -cpu 1
func BenchmarkCrowdJoins(b *testing.B) {
	const present, joining = 500, 500
	meta := func(int) map[string]any {
		return map[string]any{"interest": map[string]any{"min": []float64{-100, -10, -100}, "max": []float64{100, 10, 100}}}
	}
	props := func(i int) map[string]any {
		return map[string]any{"n": 0, "position": []float64{float64(i%40) * 2, 0, float64(i/40) * 2}}
	}
	var took time.Duration
	for range b.N {
		b.StopTimer()
		n, err := relay.New(relay.Options{Tick: 50 * time.Millisecond, Quotas: relay.Quotas{MessagesPerSecond: -1, RecordsPerSecond: -1}, DigestInterval: -1,
			Priority: relay.PriorityOptions{Near: 5}})
		if err != nil {
			b.Fatal(err)
		}
		var delivered atomic.Int64
		dial := func(i int) *pipeClient {
			return dialPipe(n, fmt.Sprintf("client-%08d-joins000", i), 1, meta(i), props(i), &delivered)
		}
		clients := make([]*pipeClient, present)
		for i := range clients {
			clients[i] = dial(i)
			<-clients[i].ready
		}
		stop := updateAll(clients, 200*time.Millisecond)
		time.Sleep(time.Second)
		b.StartTimer()
		start := time.Now()
		more := make([]*pipeClient, joining)
		for i := range more {
			more[i] = dial(present + i)
		}
		for _, c := range more {
			<-c.ready
		}
		took += time.Since(start)
		b.StopTimer()
		stop()
		n.Close(context.Background())
	}
	b.ReportMetric(float64(joining*b.N)/took.Seconds(), "joins/s")
	b.ReportMetric(took.Seconds()/float64(b.N), "took-s")
}

// BenchmarkCrowdMoves: 500 clients in one area, each with an interest
// region over all of it and priority by distance, move their object at
// 5 Hz and their region with it (a crowd walking about, each seeing the
// area around it); records/s is what the node delivers a second.
//
//	go test ./relay -run '^$' -bench CrowdMoves -benchtime 3x -cpu 1
func BenchmarkCrowdMoves(b *testing.B) {
	const clients, window = 500, 3 * time.Second
	meta := func(i, v int) map[string]any {
		x := float64(v%2) * 0.5
		return map[string]any{"interest": map[string]any{"min": []float64{-100 + x, -10, -100}, "max": []float64{100 + x, 10, 100}}}
	}
	n, err := relay.New(relay.Options{Tick: 50 * time.Millisecond, Quotas: relay.Quotas{MessagesPerSecond: -1, RecordsPerSecond: -1}, DigestInterval: -1,
		Priority: relay.PriorityOptions{Near: 5}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close(context.Background())
	var delivered atomic.Int64
	cs := make([]*pipeClient, clients)
	for i := range cs {
		cs[i] = dialPipe(n, fmt.Sprintf("client-%08d-moves000", i), 1, meta(i, 0),
			map[string]any{"n": 0, "position": []float64{float64(i%25) * 2, 0, float64(i/25) * 2}}, &delivered)
		<-cs[i].ready
	}
	time.Sleep(time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for v := 1; ; v++ {
				select {
				case <-stop:
					return
				case <-t.C:
					c.update(v)
					md := meta(i, v)
					md["identifier"], md["identifierChain"] = c.id, []string{c.id}
					msg, _ := json.Marshal([]any{"metadataChange", md})
					c.write(msg)
				}
			}
		}()
	}
	perSecond := measureDelivered(b, &delivered, window)
	close(stop)
	wg.Wait()
	b.ReportMetric(perSecond, "records/s")
}
