package relay_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// BenchmarkMessages: a Go client broadcasts chat-sized messages to 50
// peers on one node over real WebSocket connections, one at a time:
// reports the time from Send until the last peer has it (p50, p99), at
// the default 50 ms tick (a message asks for a flush at once).
//
//	go test ./relay -run '^$' -bench Messages -benchtime 200x
func BenchmarkMessages(b *testing.B) {
	_, url := startNode(b, relay.Options{})
	sender := func() *client.Client {
		c, err := client.New(url, client.Options{Prefix: "sender"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		waitFor(b, "connected", 10*time.Second, c.Connected)
		return c
	}()
	const peers = 50
	ps := make([]*wiretest.Peer, peers)
	for i := range ps {
		ps[i] = wiretest.Dial(b, url, fmt.Sprintf("recv-%08d-AAAAAAAA", i), wiretest.Options{Features: []string{"messages"}, Forget: true})
	}
	time.Sleep(100 * time.Millisecond)
	count := func() int64 {
		var n int64
		for _, p := range ps {
			n += int64(p.MessageCount("message"))
		}
		return n
	}
	data := json.RawMessage(`{"text":"hello, everyone in the room"}`)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		want := int64(i+1) * peers
		t0 := time.Now()
		if err := sender.Send(peer.AppMessage{Type: "chat", Data: data}); err != nil {
			b.Fatal(err)
		}
		for count() < want {
			if time.Since(t0) > 10*time.Second {
				b.Fatalf("message %d did not reach every peer", i)
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
