package peer

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

// BenchmarkQueueTick is one tick of a busy link in an all-see-all world
// of 300 clients of 10 objects: the tick's 3,000 updates are offered
// while its writer is still writing, so they go through its queue, which
// the writer then sends a slice at a time. Per op: one tick of one link.
func BenchmarkQueueTick(b *testing.B) {
	l := busyLink()
	recs := make([]*Record, 3000)
	for i := range recs {
		recs[i] = NewRecord(gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("o%d", i), Owner: fmt.Sprintf("w%d", i/10),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage("1")})}, uint32(i))
		l.known.add(uint32(i))
	}
	var batch Batch
	b.ReportAllocs()
	for b.Loop() {
		l.Offer(recs, sendAll, nil, true)
		it := l.outbox[0]
		for it.q.drainSlice(&batch, sliceEntries) {
			batch.reset()
		}
		batch.reset()
		l.outbox = l.outbox[:0]
		putQueue(it.q) // as the writer does once the queue is sent
	}
}
