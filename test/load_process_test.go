package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runChecked runs the load tool to its end and returns its report.
func runChecked(t *testing.T, args ...string) loadReport {
	t.Helper()
	cmd := exec.Command(loadBinary(t), append(args, "--json")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("load tool: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	var rep loadReport
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	return rep
}

// nodeFootprint reads a node process's goroutines and its heap after a
// collection.
func nodeFootprint(t *testing.T, r relayProc) (goroutines float64, heap int64) {
	t.Helper()
	_, m := httpGet(t, "http://"+r.addr+"/metrics")
	return metricValue(m, "go_goroutines"), nodeHeap(t, r)
}

// TestLoadConsistency: 1,000 clients of the load tool (a process of its
// own) update their objects at 5 Hz for 30 s through a node process,
// while 50 more keep joining and leaving, 5 stop reading, and two
// Alloverse and two snapshot clients follow the whole world and write
// their own objects. Each client sees the part of the world around it
// (interest), as the users of a world this size do: with everyone seeing
// everyone, the node would deliver 5 M records a second, more than two
// cores encode and decode (TestLoadConsistencyAllSeeAll checks that case
// at 200 clients). Once the updates stop and traffic settles, every
// client's copy equals the node's world as that client sees it; the node
// has closed the readers that stopped; and once everyone has left its
// goroutines and heap are back where they started.
func TestLoadConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s of load")
	}
	// A reader that stops answers no ping: the node closes it after the
	// stall timeout, long before its socket buffers fill. 5 s, not less:
	// the load tool's thousand clients share one process, which on two
	// busy cores can take seconds to answer a ping (a client the node
	// closes reconnects, but a storm of them is not the load to measure).
	p := startProc(t, "--tick", "50ms", "--max-conns-per-ip", "-1", "--stall-timeout", "5s", "--ping-interval", "2s",
		"--snapshot-listen", "127.0.0.1:0", "--debug-listen", "127.0.0.1:0")
	node := relayProc{pid: p.cmd.Process.Pid, addr: p.Addr, node: p}
	snapAddr := snapshotAddr(t, p)
	args := []string{"--url", node.url(), "--clients", "1000", "--rate", "5", "--observers", "10", "--interest", "25",
		"--churn", "50", "--stalled", "5", "--allo", "2", "--snapshot", "2", "--snapshot-addr", snapAddr}
	// A first short run of the same load makes the node allocate what it
	// keeps for the next load (the runtime's records of past goroutines,
	// buffers sized for the busiest tick): the baseline against which the
	// long run must leave nothing behind.
	runChecked(t, append(args, "--warmup", "1s", "--duration", "2s")...)
	waitLinks(t, node, 0)
	g0, h0 := settledFootprint(t, node, -1, -1)

	rep := runChecked(t, append(args, "--warmup", "2s", "--duration", "30s", "--check")...)
	t.Logf("report %+v", rep)
	// The load ran: at least half the 150,000 updates scheduled (the load
	// tool shares two cores with the node and falls behind its schedule
	// on a busy machine: 121,506 on a clean-clone run; what the node
	// sustains is the benchmarks' business, not this test's).
	if rep.Checked != 1000 || rep.Inconsistent != 0 || rep.Errors != 0 || rep.Delivered == 0 || rep.Sent < 1000*5*30/2 {
		t.Fatalf("report %+v", rep)
	}
	if rep.AlloClients != 2 || rep.AlloInconsistent != 0 || rep.SnapshotClients != 2 || rep.SnapshotInconsistent != 0 {
		t.Fatalf("bridged clients: %+v", rep)
	}
	log := node.node.Log()
	if n := strings.Count(log, "peer stalled; closing link") + strings.Count(log, "did not answer a keepalive ping"); n < 5 {
		t.Errorf("the node closed %d stalled readers, want the 5 that stopped reading", n)
	}

	waitLinks(t, node, 0)
	g1, h1 := settledFootprint(t, node, g0, h0)
	t.Logf("after the first run: %v goroutines, heap %d KiB; after the long run: %v goroutines, heap %d KiB", g0, h0>>10, g1, h1>>10)
}

// settledFootprint waits until the objects of departed clients are gone
// (after the reclaim grace period) and the node's goroutines and heap
// are at most g0 (give or take a few of the runtime's and the HTTP
// server's) and h0 plus 1 MiB (1 KiB per client of a 1,000-client load),
// and returns them. Negative bounds just wait for the world to empty.
func settledFootprint(t *testing.T, r relayProc, g0 float64, h0 int64) (float64, int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, m := httpGet(t, "http://"+r.addr+"/metrics")
		objects := metricValue(m, `solipsism_objects{role="server"}`)
		g, h := nodeFootprint(t, r)
		if objects == 0 && (g0 < 0 || (g <= g0+5 && h <= h0+1<<20)) {
			return g, h
		}
		if time.Now().After(deadline) {
			t.Fatalf("after everyone left: %v objects, %v goroutines (before: %v), heap %d KiB (before: %d KiB); what the heap holds:\n%s",
				objects, g, g0, h>>10, h0>>10, heapTop(t, r))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestLoadConsistencyAllSeeAll: 200 clients that all see the whole world
// update at 5 Hz, with 20 more joining and leaving and 5 that stop
// reading; after quiesce every copy equals the node's world.
func TestLoadConsistencyAllSeeAll(t *testing.T) {
	node := startProc(t, "--tick", "50ms", "--max-conns-per-ip", "-1", "--stall-timeout", "2s", "--ping-interval", "1s")
	rep := runChecked(t, "--url", node.URL(), "--clients", "200", "--rate", "5", "--observers", "5",
		"--churn", "20", "--stalled", "5", "--warmup", "1s", "--duration", "5s", "--check")
	t.Logf("report %+v", rep)
	if rep.Checked != 200 || rep.Inconsistent != 0 || rep.Errors != 0 || rep.Delivered == 0 {
		t.Fatalf("report %+v", rep)
	}
	log := node.Log()
	if n := strings.Count(log, "peer stalled; closing link") + strings.Count(log, "did not answer a keepalive ping"); n < 5 {
		t.Errorf("the node closed %d stalled readers, want the 5 that stopped reading", n)
	}
}

// waitLinks waits until the node has n links.
func waitLinks(t *testing.T, r relayProc, n int) { waitMetric(t, r, "solipsism_links{", n) }

// TestLoadBridgedRegions: the load tool's Alloverse and snapshot clients
// stand on the grid of a big world (--interest) with regions of their own
// (--allo-view against the node's --allo-view-radius, --snapshot-interest)
// while 200 clients update at 5 Hz: at the end each holds exactly the
// node's objects of its region (the tool's check), and fewer than the
// world.
func TestLoadBridgedRegions(t *testing.T) {
	p := startProc(t, "--tick", "50ms", "--max-conns-per-ip", "-1", "--snapshot-listen", "127.0.0.1:0", "--allo-view-radius", "25")
	rep := runChecked(t, "--url", p.URL(), "--clients", "200", "--rate", "5", "--interest", "25", "--move", "2",
		"--allo", "3", "--allo-view", "25", "--snapshot", "3", "--snapshot-interest", "25", "--snapshot-addr", snapshotAddr(t, p),
		"--warmup", "1s", "--duration", "4s", "--check")
	t.Logf("report %+v", rep)
	if rep.Checked != 200 || rep.Inconsistent != 0 || rep.Errors != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.AlloClients != 3 || rep.AlloInconsistent != 0 || rep.SnapshotClients != 3 || rep.SnapshotInconsistent != 0 {
		t.Fatalf("bridged clients: %+v", rep)
	}
	// 206 objects in all; a region of 50 × 50 on a grid 10 apart holds
	// about 25 of them.
	if rep.AlloHeld == 0 || rep.AlloHeld > 100 || rep.SnapshotHeld == 0 || rep.SnapshotHeld > 100 {
		t.Fatalf("the bridged clients held %.1f (Alloverse) and %.1f (snapshot) objects of 206", rep.AlloHeld, rep.SnapshotHeld)
	}
}

// heapTop returns the node's live heap by allocation site, as `go tool
// pprof -top` shows it, for the message of a failed check (what a node
// kept is then named, not guessed).
func heapTop(t *testing.T, r relayProc) string {
	_, body := httpGet(t, "http://"+debugAddr(t, r)+"/debug/pprof/heap?gc=1")
	f := filepath.Join(t.TempDir(), "heap.pprof")
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		return err.Error()
	}
	out, err := exec.Command("go", "tool", "pprof", "-sample_index=inuse_space", "-top", "-nodecount=25", nodeBinary(t), f).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof: %v\n%s", err, out)
	}
	return string(out)
}
