package test

import (
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestBurstsConverge: a mesh of two members, a proxy chain of depth 2 under
// one of them. A peer on the deepest proxy sends 5,000 objects in one
// message and leaves after a second; right after, 12 peers join on every
// node, each with an object; then a burst on a mesh member. At the end every
// peer's world equals its node's, and no 2016 peer was sent what crashes it.
func TestBurstsConverge(t *testing.T) {
	secret := strings.Repeat("cd", 32)
	// Links between the nodes compare digests every 300 ms: at the end,
	// none may have needed a repair.
	digests := []string{"--digest-interval", "300ms"}
	common := append([]string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "burst", "--mesh-profile", "local"}, digests...)
	a := startProc(t, common...)
	b := startProc(t, append(common, "--join", meshAddr(t, a))...)
	waitMesh(t, []*proc{a, b})
	p1 := startProc(t, append(digests, "--role", "proxy", "--upstream", b.URL())...)
	p2 := startProc(t, append(digests, "--role", "proxy", "--upstream", p1.URL())...)
	nodes := []*proc{a, b, p1, p2}
	waitUntil(t, "the proxies ready", 10*time.Second, func() bool {
		for _, p := range []*proc{p1, p2} {
			if code, _ := httpGet(t, "http://"+p.Addr+"/readyz"); code != 200 {
				return false
			}
		}
		return true
	})

	burst(t, p2, "burst-AAAAAAAA-AAAAAAAA", 5000, time.Second)
	peers := joinPeers(t, 12, "cccccccc", func(i int) *proc { return nodes[i%len(nodes)] })
	burst(t, a, "burst-BBBBBBBB-BBBBBBBB", 5000, 200*time.Millisecond)
	for _, pa := range peers[:4] {
		pa.peer.Change(wiretest.Update("obj-"+pa.peer.ID, pa.peer.ID, map[string]any{"n": -1}))
	}
	t0 := time.Now()
	waitConverged(t, peers, 120*time.Second)
	t.Logf("converged %s after the last burst", time.Since(t0).Round(time.Millisecond))
	time.Sleep(time.Second) // a few more digests
	for _, n := range nodes {
		if got := len(worldOf(t, n)); got != len(peers) {
			t.Errorf("%s holds %d objects, want %d", n.Addr, got, len(peers))
		}
		_, m := httpGet(t, "http://"+n.Addr+"/metrics")
		if r := repairsOf(m); r != 0 {
			t.Errorf("%s repaired %v objects: a divergence\n%s", n.Addr, r, n.Log())
		}
	}
}
