package priority_test

import (
	"testing"
	"time"

	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/priority"
)

// BenchmarkDecideCrowd is one client of a crowd: 1,000 objects around it,
// each moving at 5 Hz, so a 50 ms flush brings it 250 updates, nearly all
// of them far (bands 3 and 4 wait 8 and 16 ticks). It reports the cost of
// deciding per update the client is sent or owed.
//
//	go test ./priority -run '^$' -bench DecideCrowd -benchmem
func BenchmarkDecideCrowd(b *testing.B) {
	const objects, perFlush = 1000, 250
	band := func(slot uint32) int {
		switch {
		case slot < 20:
			return 0
		case slot < 80:
			return 1
		case slot < 250:
			return 2
		case slot < 600:
			return 3
		}
		return 4
	}
	recs := make([][]*peer.Record, objects/perFlush)
	for k := range recs {
		for j := range perFlush {
			recs[k] = append(recs[k], update(uint32(k*perFlush+j), k))
		}
	}
	p := priority.New()
	now := time.Unix(0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		batch := recs[i%len(recs)]
		es := p.Entries(len(batch))
		for j, r := range batch {
			es[j] = priority.Entry{Rec: r, Verdict: peer.Send, Placed: true}
		}
		p.Decide(es, true, func(j int) int { return band(batch[j].Slot) }, priority.Budget{Tick: 50 * time.Millisecond, Now: now})
		now = now.Add(50 * time.Millisecond)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perFlush), "ns/update")
}
