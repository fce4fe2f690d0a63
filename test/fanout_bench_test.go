package test

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"
)

// BenchmarkFanout: N clients each update one object at 20 Hz, tick 50 ms,
// through the node and, in the same run and taking turns with it, through
// the bare relay of TestMain. Each relay runs as its own process, pinned to
// core 0 with the load on core 1 (where taskset exists); CPU time is read
// from /proc. Reports delivered records per relay CPU-second for both, their
// ratio, and the latency of each.
//
//	go test ./test -run '^$' -bench Fanout -benchtime 1x
func BenchmarkFanout(b *testing.B) {
	for _, clients := range []int{200, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var node, bare, nodeP50, nodeP99, bareP50, bareP99 []float64
				args := []string{"--clients", fmt.Sprint(clients), "--rate", "20", "--warmup", "3s", "--duration", "8s"}
				for round := 0; round < benchRounds(); round++ {
					for _, which := range []string{"bare", "node"} {
						rep, cpu := loadOn(b, startRelay(b, which), args...)
						if rep.Errors > 0 {
							b.Fatalf("%s: load tool saw %d errors", which, rep.Errors)
						}
						perCPU := float64(rep.Delivered) / cpu.Seconds()
						b.Logf("round %d %s: %.0f records/s, %.2f cores, %.0f records/cpu-s, p50 %.1f ms, p99 %.1f ms",
							round, which, rep.DeliveredPerS, cpu.Seconds()/8, perCPU, rep.P50ms, rep.P99ms)
						if which == "bare" {
							bare, bareP50, bareP99 = append(bare, perCPU), append(bareP50, rep.P50ms), append(bareP99, rep.P99ms)
						} else {
							node, nodeP50, nodeP99 = append(node, perCPU), append(nodeP50, rep.P50ms), append(nodeP99, rep.P99ms)
						}
					}
				}
				b.ReportMetric(median(node), "node-records/cpu-s")
				b.ReportMetric(median(bare), "bare-records/cpu-s")
				b.ReportMetric(median(node)/median(bare), "node/bare")
				b.ReportMetric(median(nodeP50), "node-p50-ms")
				b.ReportMetric(median(nodeP99), "node-p99-ms")
				b.ReportMetric(median(bareP50), "bare-p50-ms")
				b.ReportMetric(median(bareP99), "bare-p99-ms")
			}
		})
	}
}

var downstreamLinksRE = regexp.MustCompile(`(?m)^solipsism_links\{kind="downstream",role="server"\} (\d+)`)

// BenchmarkIdleConnections: 1,000 idle WebSocket clients (handshake done,
// nothing flowing) on the node and, in the same run, on the bare relay.
// Reports each process's RSS growth per connection two ways: marginal,
// what each of 1,000 clients costs a process that already serves 100, and
// cold, the growth from a fresh process to 1,100 clients divided by 1,100,
// which includes one-time costs such as code paged in by the first
// handshake. For the node it also
// reports the marginal heap, goroutine stacks and goroutines.
//
//	go test ./test -run '^$' -bench IdleConnections -benchtime 1x
func BenchmarkIdleConnections(b *testing.B) {
	const warm, n = 100, 1000
	for i := 0; i < b.N; i++ {
		m := map[string][]float64{}
		add := func(k string, v float64) { m[k] = append(m[k], v) }
		for round := 0; round < benchRounds(); round++ {
			for _, which := range []string{"bare", "node"} {
				r := startRelay(b, which)
				if which == "node" {
					// The probes' own first use (pprof, Prometheus) is not
					// a connection's cost.
					nodeMetric(b, r, "go_goroutines")
					nodeHeap(b, r)
				}
				time.Sleep(time.Second)
				_, rss0 := procUsage(b, r.pid)
				first := connectIdle(b, r, which, warm, 0)
				var g0, stack0 float64
				var heap0 int64
				if which == "node" {
					g0 = nodeMetric(b, r, "go_goroutines")
					stack0 = nodeMetric(b, r, "go_memstats_stack_inuse_bytes")
					heap0 = nodeHeap(b, r)
				}
				_, rssWarm := procUsage(b, r.pid)
				second := connectIdle(b, r, which, n, warm)
				_, rss1 := procUsage(b, r.pid)
				if which == "node" {
					links(b, r, warm+n)
				}
				marginal := float64(rss1-rssWarm) / n
				cold := float64(rss1-rss0) / (warm + n)
				add(which+"-RSS-B/conn", marginal)
				add(which+"-cold-RSS-B/conn", cold)
				if which == "node" {
					g1 := nodeMetric(b, r, "go_goroutines")
					stack1 := nodeMetric(b, r, "go_memstats_stack_inuse_bytes")
					heap := float64(nodeHeap(b, r)-heap0) / n
					add("node-heap-B/conn", heap)
					add("node-stack-B/conn", (stack1-stack0)/n)
					add("node-goroutines/conn", (g1-g0)/n)
					b.Logf("round %d node: RSS %.0f B/conn (cold %.0f), heap %.0f B/conn, stacks %.0f B/conn, %.2f goroutines/conn",
						round, marginal, cold, heap, (stack1-stack0)/n, (g1-g0)/n)
				} else {
					b.Logf("round %d bare: RSS %.0f B/conn (cold %.0f)", round, marginal, cold)
				}
				second()
				first()
			}
		}
		for _, k := range []string{"node-RSS-B/conn", "bare-RSS-B/conn", "node-cold-RSS-B/conn", "bare-cold-RSS-B/conn",
			"node-heap-B/conn", "node-stack-B/conn", "node-goroutines/conn"} {
			b.ReportMetric(median(m[k]), k)
		}
	}
}

// connectIdle connects n idle clients to r with the load tool and waits
// for their handshakes to finish and memory to settle, without probing the
// process meanwhile. It returns a function that disconnects them.
func connectIdle(tb testing.TB, r relayProc, which string, n, have int) (stop func()) {
	tb.Helper()
	cmd := pinned("1", loadBinary(tb), "--url", r.url(), "--clients", fmt.Sprint(n), "--idle")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	stop = func() { stdin.Close(); cmd.Wait() }
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "connected" {
		stop()
		tb.Fatalf("load tool did not connect: %q", sc.Text())
	}
	time.Sleep(3 * time.Second) // handshakes done, memory settled
	if which == "node" {
		links(tb, r, have+n)
	}
	return stop
}

// links checks that the node serves n downstream links.
func links(tb testing.TB, r relayProc, n int) {
	tb.Helper()
	_, body := httpGet(tb, "http://"+r.addr+"/metrics")
	if m := downstreamLinksRE.FindStringSubmatch(body); m == nil || m[1] != fmt.Sprint(n) {
		tb.Fatalf("node serves %v links, want %d", m, n)
	}
}

var (
	heapAllocRE = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)`)
	debugAddrRE = regexp.MustCompile(`msg="serving debug endpoints" addr=(\S+)`)
)

// BenchmarkGuardedFanout: the fan-out of BenchmarkFanout (200 clients × 20
// Hz) through a node with authentication and every limit on, and, taking
// turns with it in the same run, through one with them off. Reports node
// CPU per delivered record for both and their ratio.
//
//	go test ./test -run '^$' -bench GuardedFanout -benchtime 1x
func BenchmarkGuardedFanout(b *testing.B) {
	off, on, token := guards(b, 1000)
	for i := 0; i < b.N; i++ {
		var guarded, open []float64
		args := []string{"--clients", "200", "--rate", "20", "--warmup", "3s", "--duration", "8s"}
		for round := 0; round < benchRounds(); round++ {
			for _, guard := range []bool{false, true} {
				flags, la := off, args
				if guard {
					flags, la = on, append(append([]string{}, args...), "--token", token)
				}
				r := startNodeProc(b, append([]string{"--tick", "50ms"}, flags...)...)
				rep, cpu := loadOn(b, r, la...)
				if rep.Errors > 0 {
					b.Fatalf("guarded=%v: load tool saw %d errors", guard, rep.Errors)
				}
				perCPU := float64(rep.Delivered) / cpu.Seconds()
				b.Logf("round %d guarded=%v: %.0f records/cpu-s, p99 %.1f ms", round, guard, perCPU, rep.P99ms)
				if guard {
					guarded = append(guarded, perCPU)
				} else {
					open = append(open, perCPU)
				}
			}
		}
		b.ReportMetric(median(guarded), "guarded-records/cpu-s")
		b.ReportMetric(median(open), "open-records/cpu-s")
		b.ReportMetric(median(guarded)/median(open), "guarded/open")
	}
}
