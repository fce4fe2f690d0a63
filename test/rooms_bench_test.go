package test

import (
	"fmt"
	"testing"
)

// BenchmarkRooms: 1,000 WebSocket clients on one node (its own process,
// pinned to a core), each moving its object twice a second, in 100 rooms
// of 10 and, in the same run and taking turns, in one room of 1,000.
// Reports, per client, the records and bytes it receives per second and
// the node CPU it costs (node CPU-milliseconds per second per client),
// for both, and their ratios.
//
//	go test ./test -run '^$' -bench Rooms -benchtime 1x
func BenchmarkRooms(b *testing.B) {
	const clients = 1000
	args := func(rooms int) []string {
		return []string{"--clients", fmt.Sprint(clients), "--rooms", fmt.Sprint(rooms), "--rate", "2", "--observers", "0",
			"--warmup", "5s", "--duration", "8s"}
	}
	for i := 0; i < b.N; i++ {
		m := map[string][]float64{}
		for round := 0; round < benchRounds(); round++ {
			for _, rooms := range []int{100, 1} {
				rep, cpu := loadOn(b, startRelay(b, "node"), args(rooms)...)
				if rep.Errors > 0 {
					b.Fatalf("rooms=%d: the load tool saw %d errors: %s", rooms, rep.Errors, rep.FirstError)
				}
				name := fmt.Sprintf("%dx%d", rooms, clients/rooms)
				recs := rep.DeliveredPerS / clients
				bytes := rep.BytesPerS / clients
				cpuMs := cpu.Seconds() * 1000 / rep.Seconds / clients
				b.Logf("round %d, %s rooms: per client %.0f records/s, %.0f bytes/s, %.3f node CPU-ms/s", round, name, recs, bytes, cpuMs)
				m[name+"-records/s"] = append(m[name+"-records/s"], recs)
				m[name+"-bytes/s"] = append(m[name+"-bytes/s"], bytes)
				m[name+"-cpu-ms/s"] = append(m[name+"-cpu-ms/s"], cpuMs)
			}
		}
		for k, v := range m {
			b.ReportMetric(median(v), k)
		}
		b.ReportMetric(median(m["1x1000-bytes/s"])/median(m["100x10-bytes/s"]), "bytes-1room/100rooms")
		b.ReportMetric(median(m["1x1000-cpu-ms/s"])/median(m["100x10-cpu-ms/s"]), "cpu-1room/100rooms")
	}
}
