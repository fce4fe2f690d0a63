package gameworld

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkApply: what the world costs per record: 10,000 objects of 100
// owners added, updated and removed (ns per record).
func BenchmarkApply(b *testing.B) {
	const n = 10000
	adds := make([]Change, n)
	updates := make([]Change, n)
	removes := make([]Change, n)
	for i := range n {
		id := fmt.Sprint("obj-", i)
		adds[i] = Change{Type: Add, ID: id, Owner: fmt.Sprint("owner-", i%100), Properties: PropertiesOf(map[string]json.RawMessage{"position": []byte(fmt.Sprintf("[%d,1,2]", i))})}
		updates[i] = Change{Type: Update, ID: id, Properties: PropertiesOf(map[string]json.RawMessage{"position": []byte(fmt.Sprintf("[%d,2,2]", i))})}
		removes[i] = Change{Type: Remove, ID: id}
	}
	w := New("w")
	b.ResetTimer()
	for range b.N {
		w.Apply(adds, nil)
		w.Apply(updates, nil)
		w.Apply(removes, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*3*n), "ns/record")
}
