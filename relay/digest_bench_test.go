package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/solipsism/mesh/antientropy"
	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
)

// BenchmarkDigest: what anti-entropy costs a node holding 100,000 objects
// (100 owners, 3 properties each): one digest of a link whose peer sees
// them all (ns/op), and its size. With 1,000 such links and the default
// 30 s interval, the node spends 1,000 × ns/op every 30 s on digests:
// the share of one core is reported as core-%.
func BenchmarkDigest(b *testing.B) {
	const objects = 100000
	s, url := startNode(b, relay.Options{Tick: 5 * time.Millisecond, DigestInterval: time.Hour})
	changes := make([]gameworld.Change, 0, objects)
	for i := range objects {
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("obj-%08d", i),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": []byte(fmt.Sprintf("[%d,1,2]", i)), "color": []byte(`"red"`), "n": []byte(fmt.Sprint(i))})})
	}
	if _, err := s.Apply(changes); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{DigestInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	waitFor(b, "the client's copy", 60*time.Second, func() bool { return c.World().Len() == objects })
	// Every digest is measured, not the budget.
	if !s.SendDigestNow() {
		b.Fatal("no link speaks digests")
	}
	b.ResetTimer()
	for range b.N {
		s.SendDigestNow()
	}
	b.StopTimer()
	perLink := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(100*perLink*1000/relay.DefaultDigestInterval.Seconds(), "core-%@1000links")
	b.ReportMetric(float64(19*antientropy.Buckets(objects)+40), "bytes/digest")
}
