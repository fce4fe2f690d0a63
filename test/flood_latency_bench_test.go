package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkFloodLatency: one client sends 99,000 records in one message;
// while the node works through it, and again while the 99,000 removes of
// its leaving go out, a fresh pair of clients connects (one of them where
// the flood entered, the other at the far end: the far member of a
// 3-member mesh, the end of a proxy chain of depth 2, or the same node),
// and one adds an object. Reported: the time from the pair's arrival until
// the other sees that object (ms), per topology and phase: a node that
// holds its lock through bulk work makes the pair wait to connect too.
// For the removal, also the CPU time all the nodes spent from the leaving
// until each had let the flood go (nodes-cpu-ms).
// The target is about one tick (50 ms) plus the hop: a flood on one link
// must not hold up anyone else's changes.
//
//	go test ./test -run '^$' -bench FloodLatency -benchtime 3x
func BenchmarkFloodLatency(b *testing.B) {
	const records = 99_000
	for _, name := range []string{"node", "chain", "mesh"} {
		for _, phase := range []string{"flood", "removal"} {
			b.Run(name+"/"+phase, func(b *testing.B) {
				var worst, total, cpu time.Duration
				for i := range b.N {
					tp := startTopo(b, name)
					flooder := floodClient(b, tp.entry.URL(), fmt.Sprintf("flood-%08d-%08d", i, 0))
					msg := floodMessage(fmt.Sprintf("flood-%08d-%08d", i, 0), records)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					if err := flooder.Write(ctx, websocket.MessageText, msg); err != nil {
						b.Fatal(err)
					}
					if phase == "removal" {
						// The far end takes in the whole flood first (a node
						// is sent only what its peers can see: this watcher
						// sees everything).
						floodClient(b, tp.far.URL(), fmt.Sprintf("watch-%08d-%08d", i, 1))
						waitObjectsAt(b, tp.far, records)
						cpu -= tp.cpu(b)
						flooder.Close(websocket.StatusNormalClosure, "done")
					}
					// From the pair's arrival: a node that holds its lock
					// through bulk work keeps them from connecting too.
					t0 := time.Now()
					probe := fmt.Sprintf("probe-%d", i)
					seen := watchFor(b, tp.far.URL(), probe)
					addOne(b, tp.entry.URL(), fmt.Sprintf("maker-%08d-%08d", i, 0), probe)
					select {
					case <-seen:
					case <-time.After(60 * time.Second):
						b.Fatalf("%s: the pair's object did not arrive within 60 s", b.Name())
					}
					d := time.Since(t0)
					if phase == "removal" {
						// What the departure cost every node, until each
						// has let the flood go.
						for _, p := range tp.nodes() {
							waitUntil(b, "the departure done", time.Minute, func() bool {
								_, m := httpGet(b, "http://"+p.Addr+"/metrics")
								return max(metricValue(m, `solipsism_objects{role="server"}`), metricValue(m, `solipsism_objects{role="proxy"}`)) < 10
							})
						}
						cpu += tp.cpu(b)
					}
					tp.stop()
					total += d
					worst = max(worst, d)
					b.Logf("%s: %v (target %v)", b.Name(), d.Round(time.Millisecond), time.Duration(1+tp.hops)*50*time.Millisecond)
				}
				b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
				b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
				if phase == "removal" {
					b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "nodes-cpu-ms")
				}
			})
		}
	}
}

// stop kills the topology's processes: an iteration's nodes must not
// take the next one's CPU (a flood's 99,000 objects stay in them).
func (tp benchTopo) stop() {
	for _, p := range tp.nodes() {
		p.Kill()
	}
}

// nodes returns the topology's distinct processes.
func (tp benchTopo) nodes() []*proc {
	out := []*proc{tp.entry}
	for _, p := range []*proc{tp.mid, tp.far} {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// cpu returns the CPU time (user and system) the topology's processes
// have used so far.
func (tp benchTopo) cpu(tb testing.TB) time.Duration {
	var sum time.Duration
	for _, p := range tp.nodes() {
		c, _ := procUsage(tb, p.cmd.Process.Pid)
		sum += c
	}
	return sum
}

// floodMessage is one worldChange adding n objects of owner.
func floodMessage(owner string, n int) []byte {
	var sb strings.Builder
	sb.WriteString(`["worldChange",{"timestamp":1,"changes":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"add","id":"%s-%d","owner":%q,"properties":{"position":[%d,0,%d],"n":%d}}`, owner, i, owner, i%300, i/300, i)
	}
	sb.WriteString(`]}]`)
	return []byte(sb.String())
}

// addOne connects a raw client that adds one object right after its
// handshake, and returns when the add was written.
func addOne(tb testing.TB, url, id, obj string) time.Time {
	tb.Helper()
	c := floodClient(tb, url, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `["worldChange",{"timestamp":1,"changes":[{"type":"add","id":%q,"owner":%q,"properties":{"probe":true}}]}]`, obj, id)); err != nil {
		tb.Fatal(err)
	}
	return time.Now()
}

// waitObjectsAt waits until p's node holds at least n objects.
func waitObjectsAt(tb testing.TB, p *proc, n int) {
	tb.Helper()
	waitUntil(tb, fmt.Sprintf("%d objects", n), 60*time.Second, func() bool {
		_, m := httpGet(tb, "http://"+p.Addr+"/metrics")
		return max(metricValue(m, `solipsism_objects{role="server"}`), metricValue(m, `solipsism_objects{role="proxy"}`)) >= float64(n)
	})
}
