package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// Three solipsism-node processes joined with --join; kill -9 one; the
// survivors clean up after it.
func TestMeshProcesses(t *testing.T) {
	secret := strings.Repeat("ab", 32)
	common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "test", "--mesh-profile", "local", "--tick", "20ms"}
	a := startProc(t, common...)
	seed := meshAddr(t, a)
	b := startProc(t, append(common, "--join", seed)...)
	c := startProc(t, append(common, "--join", seed)...)
	procs := []*proc{a, b, c}
	waitMesh(t, procs)
	clients := make([]*wiretest.Peer, 3)
	for i, p := range procs {
		clients[i] = wiretest.Dial(t, p.URL(), fmt.Sprintf("client-%08d-procmesh", i), wiretest.Options{})
		clients[i].Change(wiretest.Add(fmt.Sprintf("o%d", i), clients[i].ID, props{"i": i}))
	}
	for i, cl := range clients {
		for j := range clients {
			if i != j {
				cl.WaitProp(fmt.Sprintf("o%d", j), "i", fmt.Sprint(j))
			}
		}
	}
	_, m := httpGet(t, "http://"+a.Addr+"/metrics")
	if v := metricValue(m, `solipsism_mesh_members{role="server"}`); v != 2 {
		t.Errorf("mesh_members = %v, want 2", v)
	}
	if v := metricValue(m, `solipsism_mesh_change_records_total{direction="in",role="server"}`); v < 2 {
		t.Errorf("mesh records in = %v, want ≥ 2", v)
	}

	c.Kill() // kill -9: no Leave
	// memberlist's stock "local" profile declares a node dead after at
	// least 3 s of suspicion, plus probing.
	for _, cl := range clients[:2] {
		cl.Wait("o2 gone", 15*time.Second, func(m map[string]wiretest.Object) bool { _, ok := m["o2"]; return !ok })
	}
	if got := len(meshHealth(t, a).Mesh.Members); got != 1 {
		t.Errorf("survivor still lists %d other members", got)
	}
	// The survivors still talk to each other.
	clients[0].Change(wiretest.Update("o0", clients[0].ID, props{"i": 10}))
	clients[1].WaitProp("o0", "i", "10")
	for _, cl := range clients[:2] {
		cl.CheckClean()
	}
}

// A node with the wrong secret or label does not join and says why.
func TestMeshProcessWrongSecret(t *testing.T) {
	a := startProc(t, "--mesh-bind", "127.0.0.1:0", "--mesh-secret", strings.Repeat("ab", 32), "--mesh-profile", "local")
	seed := meshAddr(t, a)
	for _, tc := range []struct{ name, secret, label string }{
		{"wrong secret", strings.Repeat("cd", 32), ""},
		{"wrong label", strings.Repeat("ab", 32), "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--mesh-bind", "127.0.0.1:0", "--join", seed, "--mesh-secret", tc.secret, "--mesh-profile", "local"}
			if tc.label != "" {
				args = append(args, "--mesh-label", tc.label)
			}
			bad := startProc(t, args...)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(bad.Log(), "could not join the mesh") {
				if time.Now().After(deadline) {
					t.Fatalf("no explanation in the log:\n%s", bad.Log())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if h := meshHealth(t, bad); h.Mesh.Joined || len(h.Mesh.Members) != 0 {
				t.Fatalf("bad node joined: %+v", h)
			}
			if h := meshHealth(t, a); len(h.Mesh.Members) != 0 {
				t.Fatalf("good node admitted a bad one: %+v", h)
			}
		})
	}
	if _, err := runBinary(nodeBinary(t), []string{"--data-dir", "", "--mesh-bind", "127.0.0.1:0", "--mesh-secret", "tooshort"}, nil); err == nil {
		t.Fatal("a malformed secret was accepted")
	}
}
