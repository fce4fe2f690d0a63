package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestBurstThenJoin: server ← proxy. A client of the proxy sends 20,000
// objects in one message (a level load), stays a second and leaves; right
// after, 40 clients join, alternating server and proxy, each adds one
// object, and every one must see the 39 others (then every peer's world
// equals its node's). The same with the burst entered at the server and
// the clients on server ← proxy ← proxy.
func TestBurstThenJoin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chain   int  // proxies under the server
		atProxy bool // the burst enters at the last proxy, else at the server
	}{
		{"burst at the proxy", 1, true},
		{"burst at the server, chain of two", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startProc(t, "--digest-interval", "300ms")
			nodes := []*proc{srv}
			for range tc.chain {
				nodes = append(nodes, startProc(t, "--digest-interval", "300ms", "--role", "proxy", "--upstream", nodes[len(nodes)-1].URL()))
			}
			waitUntil(t, "the proxies ready", 10*time.Second, func() bool {
				for _, p := range nodes[1:] {
					if code, _ := httpGet(t, "http://"+p.Addr+"/readyz"); code != 200 {
						return false
					}
				}
				return true
			})
			at := srv
			if tc.atProxy {
				at = nodes[len(nodes)-1]
			}
			// The burst, from a peer that stays a second after the whole of
			// it reached the server, and leaves.
			b := wiretest.Dial(t, at.URL(), "burst-AAAAAAAA-AAAAAAAA", wiretest.Options{Forget: true})
			waitAsked(t, b)
			time.Sleep(50 * time.Millisecond)
			recs := make([]map[string]any, 20000)
			for i := range recs {
				recs[i] = wiretest.Add(fmt.Sprintf("b-%d", i), b.ID, map[string]any{"i": i, "position": []int{i % 100, 0, i / 100}})
			}
			b.Change(recs...)
			waitUntil(t, "the burst at the server", 30*time.Second, func() bool {
				_, m := httpGet(t, "http://"+srv.Addr+"/metrics")
				return metricValue(m, `solipsism_objects{role="server"}`) >= 20000
			})
			time.Sleep(time.Second)
			b.Close()
			// The clients alternate between the server and the farthest
			// proxy.
			ends := []*proc{srv, nodes[len(nodes)-1]}
			peers := joinPeers(t, 40, "joinjoin", func(i int) *proc { return ends[i%2] })
			for _, pa := range peers {
				pa.peer.Wait("the 39 others", 25*time.Second, func(m map[string]wiretest.Object) bool {
					n := 0
					for id := range m {
						if len(id) > 4 && id[:4] == "obj-" {
							n++
						}
					}
					return n == 39
				})
			}
			waitConverged(t, peers, 30*time.Second)
			for _, n := range nodes {
				_, m := httpGet(t, "http://"+n.Addr+"/metrics")
				if r := repairsOf(m); r != 0 {
					t.Errorf("%s repaired %v objects: a divergence", n.Addr, r)
				}
			}
		})
	}
}
