package scope

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkMemory: a 32×32×32 grid of blocks with a type and a colour:
// heap per block held by a Scope and by a Replica.
//
//	go test ./scope -run '^$' -bench Memory -benchtime 1x
func BenchmarkMemory(b *testing.B) {
	const side = 32
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := 0; i < b.N; i++ {
		h0 := heap()
		s := New()
		for x := range side {
			for y := range side {
				for z := range side {
					s.Set(fmt.Sprintf("%d,%d,%d", x, y, z), Fields{"t": json.RawMessage(`"stone"`), "c": json.RawMessage(fmt.Sprint((x + y + z) % 16))})
				}
			}
		}
		s.Tick()
		h1 := heap()
		r := NewReplica()
		r.Apply(s.Snapshot(), nil)
		h2 := heap()
		b.ReportMetric(float64(h1-h0)/(side*side*side), "scope-bytes/block")
		b.ReportMetric(float64(h2-h1)/(side*side*side), "replica-bytes/block")
		runtime.KeepAlive(s)
		runtime.KeepAlive(r)
	}
}

// BenchmarkOneBlockChange: one block of a 32×32×32 grid changes per tick:
// the delta's size on the wire (JSON) and the time to make and apply it.
//
//	go test ./scope -run '^$' -bench OneBlock
func BenchmarkOneBlockChange(b *testing.B) {
	s, r := New(), NewReplica()
	for x := range 32 {
		for y := range 32 {
			for z := range 32 {
				s.Set(fmt.Sprintf("%d,%d,%d", x, y, z), Fields{"t": json.RawMessage(`"stone"`), "c": json.RawMessage(`1`)})
			}
		}
	}
	r.Apply(s.Tick(), nil)
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Set(fmt.Sprintf("%d,%d,%d", i%32, (i/32)%32, 5), Fields{"c": json.RawMessage(fmt.Sprint(i % 16))})
		d := s.Tick()
		if d.Empty() {
			continue // the block had that colour already
		}
		enc, _ := json.Marshal(d)
		size = len(enc)
		if err := r.Apply(d, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "delta-bytes")
}
