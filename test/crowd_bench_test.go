package test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkCrowd: a world event. SOLIPSISM_CROWD_CLIENTS clients (default
// 1,000), each moving its object at 5 Hz, all in one area seeing each
// other (crowd) or spread over a big world seeing their neighbourhood
// (spread: about 25 others), against a node (one core) without priority, with priority by
// distance (--priority-near as the scenario's --near, 5 bands: the
// farthest every 16 ticks) and with a budget too (--max-client-bytes
// 32KiB). The load tool runs on the
// other core. Reports bytes per client per second, node CPU per client
// (ms of CPU per client-second), the p99 latency of near objects' changes
// (within 5: about the 20 nearest in the crowd), how stale far objects
// (beyond 20) get (p99 and max of the age of the value a client showed
// when the next arrived; objects change every 200 ms) and, with --check,
// that every client ends with its node's world (the tool fails if not).
//
// Without priority, a crowd of 1,000 all seeing each other at 5 Hz is 5 M
// records a second, beyond both the node's core and the load tool's: that
// run takes many minutes to connect and settle. SOLIPSISM_CROWD_MODES
// (say "crowd/budget,spread/off") runs some of the six.
//
//	go test ./test -run '^$' -bench Crowd -benchtime 1x
func BenchmarkCrowd(b *testing.B) {
	clients := 1000
	if n, err := strconv.Atoi(os.Getenv("SOLIPSISM_CROWD_CLIENTS")); err == nil && n > 0 {
		clients = n
	}
	// The node's near is the load tool's (the scenario's --near): 5 in
	// the crowd (grid 2 apart), 15 spread out (grid 10 apart).
	modes := func(near string) []struct {
		name  string
		flags []string
	} {
		return []struct {
			name  string
			flags []string
		}{
			{"off", nil},
			{"priority", []string{"--priority-near", near, "--priority-bands", "5"}},
			{"budget", []string{"--priority-near", near, "--priority-bands", "5", "--max-client-bytes", "32KiB"}},
		}
	}
	for _, layout := range []string{"crowd", "spread"} {
		near := map[string]string{"crowd": "5", "spread": "15"}[layout]
		for _, mode := range modes(near) {
			if only := os.Getenv("SOLIPSISM_CROWD_MODES"); only != "" && !slices.Contains(strings.Split(only, ","), layout+"/"+mode.name) {
				continue
			}
			b.Run(layout+"/"+mode.name, func(b *testing.B) {
				for range b.N {
					r := startNodeProc(b, append([]string{"--tick", "50ms", "--max-conns-per-ip", "-1"}, mode.flags...)...)
					rep, cpu := loadOn(b, r, "--scenario", layout, "--clients", fmt.Sprint(clients), "--duration", "10s", "--warmup", "3s", "--check", "--progress=false")
					perClient := 1000 * cpu.Seconds() / rep.Seconds / float64(clients)
					b.Logf("%s/%s: %.0f B/client/s, node %.2f ms CPU per client-second, near p99 %.0f ms, far staleness p99 %.0f max %.0f ms, far behind p99 %.0f ms, %.0f records/s, %d of %d consistent, %.0f repairs",
						layout, mode.name, rep.BytesPerClient, perClient, rep.NearP99ms, rep.FarStaleP99ms, rep.FarStaleMaxMs, rep.FarBehindP99ms, rep.DeliveredPerS, rep.Checked-rep.Inconsistent, rep.Checked, rep.Repairs)
					b.ReportMetric(rep.BytesPerClient, "B/client/s")
					b.ReportMetric(perClient, "node-cpu-ms/client-s")
					b.ReportMetric(rep.NearP99ms, "near-p99-ms")
					b.ReportMetric(rep.FarStaleP99ms, "far-stale-p99-ms")
					b.ReportMetric(rep.FarStaleMaxMs, "far-stale-max-ms")
					b.ReportMetric(rep.FarBehindP99ms, "far-behind-p99-ms")
					b.ReportMetric(float64(rep.Inconsistent), "inconsistent")
				}
			})
		}
	}
}
