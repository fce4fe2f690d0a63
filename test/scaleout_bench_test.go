package test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scaleTopo is a set of node processes and the URLs clients connect to.
type scaleTopo struct {
	nodes   []*proc
	entries []string
}

// startScaleTopo starts one server ("1"), a mesh of n members ("mesh-n")
// or a server with n proxies ("proxies-n"), every node with --max-conns-per-ip
// -1 (the load comes from one address).
func startScaleTopo(tb testing.TB, name string) scaleTopo {
	tb.Helper()
	base := []string{"--max-conns-per-ip", "-1"}
	kind, nStr, _ := strings.Cut(name, "-")
	n, _ := strconv.Atoi(nStr)
	switch kind {
	case "mesh":
		common := append([]string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", strings.Repeat("cd", 32), "--mesh-label", "scale", "--mesh-profile", "local"}, base...)
		first := startProc(tb, common...)
		t := scaleTopo{nodes: []*proc{first}, entries: []string{first.URL()}}
		for range n - 1 {
			m := startProc(tb, append(common, "--join", meshAddr(tb, first))...)
			t.nodes, t.entries = append(t.nodes, m), append(t.entries, m.URL())
		}
		waitMesh(tb, t.nodes)
		return t
	case "proxies":
		s := startProc(tb, base...)
		t := scaleTopo{nodes: []*proc{s}}
		for range n {
			p := startProc(tb, append([]string{"--role", "proxy", "--upstream", s.URL()}, base...)...)
			waitUntil(tb, "the proxy ready", 10*time.Second, func() bool { c, _ := httpGet(tb, "http://"+p.Addr+"/readyz"); return c == 200 })
			t.nodes, t.entries = append(t.nodes, p), append(t.entries, p.URL())
		}
		return t
	}
	s := startProc(tb, base...)
	return scaleTopo{nodes: []*proc{s}, entries: []string{s.URL()}}
}

// cpu sums the nodes' CPU time.
func (t scaleTopo) cpu(tb testing.TB) time.Duration {
	var sum time.Duration
	for _, p := range t.nodes {
		c, _ := procUsage(tb, p.cmd.Process.Pid)
		sum += c
	}
	return sum
}

// hopBytes sums what the nodes wrote on their links to each other (mesh
// links, and a proxy's upstream link and the server's links to proxies).
func (t scaleTopo) hopBytes(tb testing.TB) uint64 {
	var sum uint64
	for _, p := range t.nodes {
		for _, l := range stateOf(tb, p).Links {
			if l.Kind == "mesh" || l.Kind == "upstream" || l.Role == "proxy" {
				sum += l.BytesOut
			}
		}
	}
	return sum
}

// BenchmarkScaleOut: the same load (SOLIPSISM_SCALE_CLIENTS clients,
// default 600, spread over a big world, each seeing about 25 others and
// moving at 5 Hz) on one node, a mesh of 2 and of 4 members, and a server
// with 2 proxies, the clients spread evenly over the members (proxies);
// and a quarter of it on one node (quarter), which is what each member of
// the mesh of 4 serves: what a record costs a node that serves fewer.
// Every process shares the machine's cores with the load tool: the
// figures are CPU time, summed over the nodes, per delivered record, and
// against the single node's in the same run; and the bytes the nodes
// wrote to each other per delivered record. Every client ends with its
// node's world (--check).
//
//	go test ./test -run '^$' -bench ScaleOut -benchtime 1x
func BenchmarkScaleOut(b *testing.B) {
	clients := 600
	if n, err := strconv.Atoi(os.Getenv("SOLIPSISM_SCALE_CLIENTS")); err == nil && n > 0 {
		clients = n
	}
	var single float64
	// quarter is one node with a quarter of the clients: what each member
	// of the mesh of 4 serves, on a node of its own.
	for _, topo := range []string{"1", "mesh-2", "mesh-4", "proxies-2", "quarter"} {
		b.Run(topo, func(b *testing.B) {
			for range b.N {
				t := startScaleTopo(b, topo)
				hop0 := t.hopBytes(b)
				n := clients
				if topo == "quarter" {
					n = clients / 4
				}
				// Nothing is pinned: the nodes share the cores with the load.
				cmd := exec.Command(loadBinary(b), "--url", strings.Join(t.entries, ","), "--json", "--scenario", "spread",
					"--clients", fmt.Sprint(n), "--duration", "15s", "--warmup", "3s", "--check", "--progress=false")
				rep, cpu := measureLoad(b, cmd, func() time.Duration { return t.cpu(b) }, nil)
				hop := t.hopBytes(b) - hop0
				perRecord := 1e6 * cpu.Seconds() / float64(rep.Delivered)
				if topo == "1" {
					single = perRecord
				}
				b.Logf("%s: %d nodes, %.0f records/s, %.2f µs of node CPU per record (%.2f× one node's), %.1f bytes between nodes per record, p99 %.0f ms, %d of %d consistent",
					topo, len(t.nodes), rep.DeliveredPerS, perRecord, perRecord/single, float64(hop)/float64(rep.Delivered), rep.P99ms, rep.Checked-rep.Inconsistent, rep.Checked)
				b.ReportMetric(perRecord, "node-cpu-µs/record")
				b.ReportMetric(perRecord/single, "×one-node")
				b.ReportMetric(float64(hop)/float64(rep.Delivered), "hop-bytes/record")
				b.ReportMetric(rep.P99ms, "p99-ms")
				b.ReportMetric(float64(rep.Inconsistent), "inconsistent")
			}
		})
	}
}
