package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// loadBinary builds the load tool once per run.
func loadBinary(tb testing.TB) string { return binary(tb, "solipsism-load") }

// startBenchNode runs a node in this process, so that its CPU time and heap
// can be measured while the load runs in another process.
func startBenchNode(tb testing.TB, opts relay.Options) (*relay.Node, string) {
	tb.Helper()
	// Every load client comes from 127.0.0.1: no per-address limit.
	opts.Quotas.ConnectionsPerIP = -1
	n, err := relay.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	srv := httptest.NewServer(mux)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
		srv.Close()
	})
	return n, wiretest.WSURL(srv)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type loadReport struct {
	Delivered     int64   `json:"delivered"`
	DeliveredPerS float64 `json:"delivered_per_second"`
	Samples       int     `json:"latency_samples"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error"`
	Reconnects    int64   `json:"reconnects"`
	Sent          int64   `json:"sent"`
	BytesPerS     float64 `json:"bytes_per_second"`
	Seconds       float64 `json:"seconds"`
	// What --check, --allo and --snapshot report.
	Checked              int `json:"checked"`
	Inconsistent         int `json:"inconsistent"`
	AlloClients          int `json:"allo_clients"`
	AlloInconsistent     int `json:"allo_inconsistent"`
	SnapshotClients      int `json:"snapshot_clients"`
	SnapshotInconsistent int `json:"snapshot_inconsistent"`
}

// startLoad runs the load tool in the background, for traffic that is not
// itself measured; it ends when its window does.
func startLoad(tb testing.TB, url string, args ...string) {
	tb.Helper()
	cmd := exec.Command(loadBinary(tb), append([]string{"--url", url}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// runLoad runs the load tool against url and measures this process's CPU
// time over the tool's measured window.
func runLoad(tb testing.TB, url string, args ...string) (loadReport, time.Duration) {
	tb.Helper()
	return runLoadHook(tb, url, nil, args...)
}

// runLoadHook is runLoad calling atStart when the measured window opens.
func runLoadHook(tb testing.TB, url string, atStart func(), args ...string) (loadReport, time.Duration) {
	tb.Helper()
	return measureLoad(tb, exec.Command(loadBinary(tb), append([]string{"--url", url, "--json"}, args...)...), cpuTime, atStart)
}

// measureLoad runs a load tool command and returns its report and the CPU
// time cpu() measures over the tool's window, calling atStart (if not nil)
// when the window opens.
func measureLoad(tb testing.TB, cmd *exec.Cmd, cpu func() time.Duration, atStart func()) (loadReport, time.Duration) {
	tb.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var rep loadReport
	var cpu0, used time.Duration
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "measuring":
			cpu0 = cpu()
			if atStart != nil {
				atStart()
			}
		case line == "measured":
			used = cpu() - cpu0
		case strings.HasPrefix(line, "{"):
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("load tool: %v", err)
	}
	return rep, used
}

// BenchmarkProxyHop measures what one proxy adds: 10 clients on a server
// process each update one object at 20 Hz (few enough that the server itself
// is not saturated at tick 0), and 50 observers receive the
// changes either from the server directly or through a proxy running in this
// process (whose CPU time is measured).
//
//	go test ./test -run '^$' -bench ProxyHop -benchtime 1x
func BenchmarkProxyHop(b *testing.B) {
	for _, tick := range []time.Duration{0, 50 * time.Millisecond} {
		for _, via := range []string{"direct", "proxy"} {
			b.Run(fmt.Sprintf("tick=%s/%s", tick, via), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					server := startProc(b, "--tick", tick.String())
					url := server.URL()
					if via == "proxy" {
						ptick := tick
						if ptick == 0 {
							ptick = peer.Immediate
						}
						p, purl := startBenchNode(b, relay.Options{Role: ownership.Proxy, Tick: ptick})
						ctx, cancel := context.WithCancel(context.Background())
						go p.RunUpstream(ctx, relay.UpstreamOptions{URL: server.URL()})
						b.Cleanup(cancel)
						url = purl
					}
					startLoad(b, server.URL(), "--clients", "10", "--rate", "20", "--observers", "0", "--warmup", "3s", "--duration", "11s")
					rep, cpu := runLoad(b, url, "--clients", "50", "--rate", "0", "--observers", "50", "--warmup", "3s", "--duration", "10s")
					if rep.Errors > 0 || rep.Samples == 0 {
						b.Fatalf("load tool: %d errors, %d samples", rep.Errors, rep.Samples)
					}
					b.ReportMetric(rep.P50ms, "p50-ms")
					b.ReportMetric(rep.P99ms, "p99-ms")
					b.ReportMetric(rep.DeliveredPerS, "records/s")
					if via == "proxy" {
						b.ReportMetric(float64(rep.Delivered)/cpu.Seconds(), "records/proxy-cpu-s")
					}
				}
			})
		}
	}
}

// BenchmarkMesh: five server nodes in one mesh on loopback, tick 0. N
// clients on node 1 each update one object at 20 Hz (and, being clients,
// receive each other's updates); 10 observers on node 5 measure
// change-to-delivery latency across the mesh. All five nodes run in this
// process, so the CPU time is that of the whole mesh.
//
//	go test ./test -run '^$' -bench Mesh -benchtime 1x
func BenchmarkMesh(b *testing.B) {
	for _, senders := range []int{10, 50} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) { benchMesh(b, senders) })
	}
}

func benchMesh(b *testing.B, senders int) {
	for i := 0; i < b.N; i++ {
		var nodes []*relay.Node
		var urls []string
		var seed string
		for j := 0; j < 5; j++ {
			n, url := startBenchNode(b, relay.Options{Tick: peer.Immediate})
			mo := relay.MeshOptions{BindAddr: "127.0.0.1:0", AdvertiseURL: url, Profile: "local"}
			if seed != "" {
				mo.Join = []string{seed}
			}
			m, err := n.JoinMesh(mo)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { m.Close() })
			if seed == "" {
				seed = m.Addr()
			}
			nodes = append(nodes, n)
			urls = append(urls, url)
		}
		waitMeshLinks(b, nodes)
		meshIn := func() uint64 { return meshRecordsIn(nodes) }
		startLoad(b, urls[0], "--clients", fmt.Sprint(senders), "--rate", "20", "--observers", "0", "--warmup", "3s", "--duration", "11s")
		var in0 uint64
		rep, cpu := runLoadHook(b, urls[4], func() { in0 = meshIn() }, "--clients", "10", "--rate", "0", "--observers", "10", "--warmup", "3s", "--duration", "10s")
		cross := meshIn() - in0
		if rep.Errors > 0 || rep.Samples == 0 {
			b.Fatalf("load tool: %d errors, %d samples", rep.Errors, rep.Samples)
		}
		b.ReportMetric(rep.P50ms, "p50-ms")
		b.ReportMetric(rep.P99ms, "p99-ms")
		b.ReportMetric(float64(cross)/cpu.Seconds(), "cross-node-records/cpu-s")
		b.ReportMetric(float64(cross)/10, "cross-node-records/s")
	}
}

// waitMeshLinks waits until every pair of in-process mesh nodes is linked
// both ways.
func waitMeshLinks(tb testing.TB, nodes []*relay.Node) {
	tb.Helper()
	want := len(nodes) * (len(nodes) - 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		linked := 0
		for _, n := range nodes {
			for _, l := range n.Links() {
				if l.Kind == "mesh" && l.Ready {
					linked++
				}
			}
		}
		if linked == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("mesh did not form: %d of %d link ends", linked, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// meshRecordsIn sums the records in-process nodes received over mesh links.
func meshRecordsIn(nodes []*relay.Node) uint64 {
	var sum uint64
	for _, n := range nodes {
		for _, l := range n.Links() {
			if l.Kind == "mesh" {
				sum += l.RecordsIn
			}
		}
	}
	return sum
}
