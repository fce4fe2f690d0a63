package test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestLoadConsistency: 200 clients of the load tool (a process of its own)
// update their objects at 5 Hz through a node process, while 20 more keep
// joining and leaving and 5 stop reading; once the updates stop and
// traffic settles, every client's copy of the world equals the node's, and
// the node has closed the readers that stopped.
func TestLoadConsistency(t *testing.T) {
	// A reader that stops answers no ping: the node closes it after the
	// stall timeout, long before its socket buffers fill.
	node := startProc(t, "--tick", "50ms", "--max-conns-per-ip", "-1", "--stall-timeout", "2s", "--ping-interval", "1s")
	cmd := exec.Command(loadBinary(t), "--url", node.URL(), "--clients", "200", "--rate", "5", "--observers", "5",
		"--churn", "20", "--stalled", "5", "--warmup", "1s", "--duration", "5s", "--check", "--json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("load tool: %v\n%s", err, out)
	}
	var rep struct {
		Sent, Delivered, Errors int64
		Checked                 int `json:"checked"`
		Inconsistent            int `json:"inconsistent"`
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.Checked != 200 || rep.Inconsistent != 0 || rep.Errors != 0 || rep.Delivered == 0 {
		t.Fatalf("report %+v", rep)
	}
	log := node.Log()
	if n := strings.Count(log, "peer stalled; closing link") + strings.Count(log, "did not answer a keepalive ping"); n < 5 {
		t.Errorf("the node closed %d stalled readers, want the 5 that stopped reading", n)
	}
}
