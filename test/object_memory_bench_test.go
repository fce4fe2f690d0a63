package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkObjectMemory: what an object costs in process RSS, on a server
// and on a proxy under it: 100,000 objects of three small properties
// ({"kind":"crate","color":"grey","position":[x,0,z]}), written by one
// client of the server and watched by one client of the proxy (so that
// the proxy holds them all). Reports the RSS growth per object of each
// process (issue 33 aims at 400 bytes).
//
//	go test ./test -run '^$' -bench ObjectMemory -benchtime 1x
func BenchmarkObjectMemory(b *testing.B) {
	const objects = 100_000
	for range b.N {
		server := startNodeProc(b, "--tick", "50ms", "--max-objects-per-owner", "-1", "--max-records-per-sec", "-1", "--max-msgs-per-sec", "-1")
		proxy := startProcEnv(b, []string{"SOLIPSISM_LOG_LEVEL=info"}, "--role", "proxy", "--upstream", server.url(), "--tick", "50ms",
			"--max-world-objects", "-1", "--max-world-bytes", "-1")
		proxyURL := "ws://" + proxy.Addr + "/ws"
		rawClient(b, proxyURL, "watch-00000000-00000000", nil)
		time.Sleep(time.Second)
		_, s0 := procUsage(b, server.pid)
		_, p0 := procUsage(b, proxy.cmd.Process.Pid)
		c := floodClient(b, server.url(), "fill-00000000-00000000")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		side := gridSide(objects)
		for start := 0; start < objects; start += 1000 {
			var sb strings.Builder
			sb.WriteString(`["worldChange",{"timestamp":1,"changes":[`)
			for i := start; i < min(objects, start+1000); i++ {
				if i > start {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"type":"add","id":"crate-%d","owner":"fill-00000000-00000000","properties":{"kind":"crate","color":"grey","position":[%d,0,%d]}}`, i, 3*(i%side), 3*(i/side))
			}
			sb.WriteString(`]}]`)
			if err := c.Write(ctx, websocket.MessageText, []byte(sb.String())); err != nil {
				b.Fatal(err)
			}
		}
		cancel()
		count := func(addr string) float64 {
			_, m := httpGet(b, "http://"+addr+"/metrics")
			for _, role := range []string{"server", "proxy"} {
				if v := metricValue(m, `solipsism_objects{role="`+role+`"}`); v > 0 {
					return v
				}
			}
			return 0
		}
		deadline := time.Now().Add(2 * time.Minute)
		for count(server.addr) < objects || count(proxy.Addr) < objects {
			if time.Now().After(deadline) {
				b.Fatalf("the world did not fill: server %v, proxy %v objects", count(server.addr), count(proxy.Addr))
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(8 * time.Second) // queues drained, the node settled (its reclaimer checks every 2 s)
		_, s1 := procUsage(b, server.pid)
		_, p1 := procUsage(b, proxy.cmd.Process.Pid)
		b.ReportMetric(float64(s1-s0)/objects, "server-rss-bytes/object")
		b.ReportMetric(float64(p1-p0)/objects, "proxy-rss-bytes/object")
		b.Logf("RSS: server %d → %d MiB, proxy %d → %d MiB", s0>>20, s1>>20, p0>>20, p1>>20)
		proxy.Stop(b)
		server.node.Stop(b)
	}
}
