package test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func idsOf(t *testing.T, p *proc) []string {
	var out []string
	for id := range objectsOf(t, p) {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestMeshKillUnderLoad: three mesh node processes, each with load tool
// clients updating their objects at 5 Hz; kill -9 of one. Within 3 s the
// survivors hold the same objects, and once memberlist declares the dead
// member gone, neither holds its clients' objects.
func TestMeshKillUnderLoad(t *testing.T) {
	secret := strings.Repeat("ef", 32)
	common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "fault", "--mesh-profile", "local",
		"--tick", "20ms", "--max-conns-per-ip", "-1"}
	a := startProc(t, common...)
	seed := meshAddr(t, a)
	procs := []*proc{a, startProc(t, append(common, "--join", seed)...), startProc(t, append(common, "--join", seed)...)}
	waitMesh(t, procs)
	for _, p := range procs {
		cmd := exec.Command(loadBinary(t), "--url", p.URL(), "--clients", "30", "--rate", "5", "--observers", "0",
			"--warmup", "60s", "--duration", "1s", "--json")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	waitAll := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s within %s: A has %d objects, B %d", what, timeout, len(idsOf(t, procs[0])), len(idsOf(t, procs[1])))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAll("all 90 objects everywhere", 20*time.Second, func() bool {
		for _, p := range procs {
			if len(idsOf(t, p)) != 90 {
				return false
			}
		}
		return true
	})
	procs[2].Kill()
	killed := time.Now()
	waitAll("the survivors agreeing", 3*time.Second, func() bool {
		return fmt.Sprint(idsOf(t, procs[0])) == fmt.Sprint(idsOf(t, procs[1]))
	})
	t.Logf("survivors agreed %s after the kill", time.Since(killed).Round(time.Millisecond))
	waitAll("the dead member's objects gone from both", 20*time.Second, func() bool {
		return len(idsOf(t, procs[0])) == 60 && len(idsOf(t, procs[1])) == 60
	})
	for _, p := range procs[:2] {
		if !strings.Contains(p.Log(), "removed the objects of a departed mesh member") {
			t.Errorf("a survivor never removed the departed member's objects")
		}
	}
}
