package test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"

	"github.com/solipsism/mesh/store"
)

// procWrites reads the bytes a process has had written to storage
// (write_bytes of /proc/PID/io: disk writes, not socket writes).
func procWrites(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		tb.Fatal(err)
	}
	get := func(key string) int64 {
		m := regexp.MustCompile(`(?m)^` + key + `: (\d+)$`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return v
	}
	return get("write_bytes")
}

// BenchmarkPersistence measures what the store costs and how fast a node
// comes back:
//
//   - 200 clients each update a persistent object at 20 Hz (4,000 durable
//     updates a second, each written within a tick), through a node with
//     and without a data directory, taking turns: node CPU per update
//     with the store over without it, and bytes written per update;
//
//   - a node started on a store of 100,000 persistent objects: time from
//     exec to serving, and its RSS then, beside a node on an empty store
//     started in the same run.
//
//     go test ./test -run '^$' -bench Persistence -benchtime 1x
func BenchmarkPersistence(b *testing.B) {
	b.Run("updates", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var off, on, bytesPer []float64
			args := []string{"--clients", "200", "--rate", "20", "--persistent", "--observers", "5", "--warmup", "3s", "--duration", "8s"}
			for round := 0; round < benchRounds(); round++ {
				for _, withStore := range []bool{false, true} {
					dir := ""
					if withStore {
						dir = b.TempDir()
					}
					r := startNodeProc(b, "--tick", "50ms", "--max-conns-per-ip", "-1", "--data-dir", dir)
					var w0 int64
					cmd := pinned("1", loadBinary(b), append([]string{"--url", r.url(), "--json"}, args...)...)
					rep, cpu := measureLoad(b, cmd, func() time.Duration { c, _ := procUsage(b, r.pid); return c },
						func() { w0 = procWrites(b, r.pid) })
					written := procWrites(b, r.pid) - w0
					if rep.Errors > 0 || rep.Sent == 0 {
						b.Fatalf("load tool: %d errors, %d sent", rep.Errors, rep.Sent)
					}
					perUpdate := cpu.Seconds() / float64(rep.Sent) * 1e6
					b.Logf("round %d, store %v: %d updates, %.1f µs node CPU each, %.0f bytes written each, p99 %.1f ms",
						round, withStore, rep.Sent, perUpdate, float64(written)/float64(rep.Sent), rep.P99ms)
					if withStore {
						on, bytesPer = append(on, perUpdate), append(bytesPer, float64(written)/float64(rep.Sent))
					} else {
						off = append(off, perUpdate)
					}
					r.node.Stop(b)
				}
			}
			b.ReportMetric(median(off), "µs-cpu/update-off")
			b.ReportMetric(median(on), "µs-cpu/update-on")
			b.ReportMetric(median(on)/median(off), "on/off")
			b.ReportMetric(median(bytesPer), "bytes-written/update")
		}
	})
	b.Run("restart", func(b *testing.B) {
		const objects = 100_000
		full := b.TempDir()
		s, err := store.OpenBolt(full)
		if err != nil {
			b.Fatal(err)
		}
		batch := store.Batch{Identifier: "server-BENCHMRK-BENCHMRK"}
		for i := range objects {
			batch.Put = append(batch.Put, store.Object{ID: fmt.Sprintf("obj-%06d", i), Owner: "server-BENCHMRK-BENCHMRK", Epoch: 1,
				Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"persistent": json.RawMessage("true"), "position": json.RawMessage(fmt.Sprintf("[%d,0,0]", i)), "color": json.RawMessage(`"red"`)})})
		}
		if err := s.Save(batch); err != nil {
			b.Fatal(err)
		}
		s.Close()
		if fi, err := os.Stat(full + "/" + store.FileName); err == nil {
			b.Logf("store of %d objects: %.1f MiB", objects, float64(fi.Size())/(1<<20))
		}
		for i := 0; i < b.N; i++ {
			var empty, loaded, emptyRSS, loadedRSS []float64
			for round := 0; round < benchRounds(); round++ {
				for _, dir := range []string{b.TempDir(), full} {
					start := time.Now()
					p := startProcEnv(b, []string{"SOLIPSISM_LOG_LEVEL=info"}, "--data-dir", dir)
					took := time.Since(start)
					_, rss := procUsage(b, p.cmd.Process.Pid)
					if dir == full {
						if !strings.Contains(p.Log(), fmt.Sprintf("objects=%d", objects)) {
							b.Fatalf("the node did not restore %d objects:\n%s", objects, p.Log())
						}
						loaded, loadedRSS = append(loaded, took.Seconds()), append(loadedRSS, float64(rss)/(1<<20))
					} else {
						empty, emptyRSS = append(empty, took.Seconds()), append(emptyRSS, float64(rss)/(1<<20))
					}
					b.Logf("round %d, %s: serving after %s, RSS %.1f MiB", round, map[bool]string{true: "100k objects", false: "empty"}[dir == full], took.Round(time.Millisecond), float64(rss)/(1<<20))
					p.Stop(b)
				}
			}
			b.ReportMetric(median(loaded), "s-start-100k")
			b.ReportMetric(median(empty), "s-start-empty")
			b.ReportMetric(median(loadedRSS), "MiB-rss-100k")
			b.ReportMetric(median(emptyRSS), "MiB-rss-empty")
		}
	})
}
