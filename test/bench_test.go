package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

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
			mo := cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: url, Profile: "local"}
			if seed != "" {
				mo.Join = []string{seed}
			}
			m, err := cluster.Join(n, mo)
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
