package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestMemoryAfterFlood: a client floods a node process with 60,000 objects
// of 1 KB and leaves; once its objects are gone the node's RSS comes back
// down by at least half of what the flood added, within seconds rather than
// the minutes Go's background scavenger would take.
func TestMemoryAfterFlood(t *testing.T) {
	p := startProc(t, "--max-records-per-sec", "-1", "--max-msgs-per-sec", "-1", "--max-objects-per-owner", "-1", "--reclaim-grace", "0s")
	node := relayProc{pid: p.cmd.Process.Pid, addr: p.Addr, node: p}
	_, rss0 := procUsage(t, node.pid)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := floodClient(t, p.URL(), "flooder")
	pad := strings.Repeat("x", 1000)
	for batch := range 60 {
		var sb strings.Builder
		sb.WriteString(`["worldChange",{"timestamp":1,"changes":[`)
		for i := range 1000 {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"type":"add","id":"flood-%d-%d","owner":"flooder","properties":{"pad":"%s"}}`, batch, i, pad)
		}
		sb.WriteString(`]}]`)
		if err := c.Write(ctx, websocket.MessageText, []byte(sb.String())); err != nil {
			t.Fatal(err)
		}
	}
	waitObjects(t, node, 60000)
	_, rssPeak := procUsage(t, node.pid)
	c.Close(websocket.StatusNormalClosure, "done")
	waitObjects(t, node, 0)

	want := rssPeak - (rssPeak-rss0)/2
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, rss := procUsage(t, node.pid)
		if rss <= want {
			t.Logf("RSS %d KiB at start, %d KiB with the flood, %d KiB after", rss0>>10, rssPeak>>10, rss>>10)
			return
		}
		if time.Now().After(deadline) {
			_, m := httpGet(t, "http://"+node.addr+"/metrics")
			t.Logf("heap in use %v, released %v, idle %v", metricValue(m, "go_memstats_heap_inuse_bytes"), metricValue(m, "go_memstats_heap_released_bytes"), metricValue(m, "go_memstats_heap_idle_bytes"))
			t.Fatalf("RSS %d KiB at start, %d KiB with the flood, still %d KiB 20 s after it left (want ≤ %d)", rss0>>10, rssPeak>>10, rss>>10, want>>10)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitObjects waits until the node holds n objects.
func waitObjects(t *testing.T, r relayProc, n int) { waitMetric(t, r, "solipsism_objects{", n) }
