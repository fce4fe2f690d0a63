package test

import (
	"fmt"
	"strings"
	"sync"
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
			b := sendBurst(t, at, 20000)
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

// TestBurstInFlightThenJoin: a client sends 20,000 objects in one message
// and closes a second after sending it, while the burst is still crossing
// the hops (a level load, then a crash). Right after, 40 2016 clients that
// do not speak departed, and announce themselves with metadataChange and
// their one object without waiting to be asked, connect at once,
// alternating between the two ends: every one must see the 39 others
// within 25 s, every peer's world must equal its node's, and no node may
// have needed a repair. The hops between our nodes carry 256 KiB/s, so
// the burst is still on its way when its holder leaves; over server ←
// proxy (the holder closing, or its connection breaking: its objects then
// wait the reclaim grace), server ← proxy ← proxy, a mesh of two, and with
// the joiners' interest regions on server ← proxy.
func TestBurstInFlightThenJoin(t *testing.T) {
	const hopRate = 256 << 10
	chain := func(t *testing.T, depth int) []*proc {
		nodes := []*proc{startProc(t)}
		for range depth {
			hop := wiretest.SlowTCP(t, nodes[len(nodes)-1].Addr, hopRate)
			nodes = append(nodes, startProc(t, "--role", "proxy", "--upstream", "ws://"+hop+"/ws"))
		}
		waitUntil(t, "the proxies ready", 10*time.Second, func() bool {
			for _, p := range nodes[1:] {
				if code, _ := httpGet(t, "http://"+p.Addr+"/readyz"); code != 200 {
					return false
				}
			}
			return true
		})
		return nodes
	}
	for _, tc := range []struct {
		name  string
		nodes func(t *testing.T) []*proc // the burst enters at the last
		extra map[string]any             // the joiners' metadata
		crash bool                       // the holder's connection breaks, rather than closes
	}{
		{"server and proxy", func(t *testing.T) []*proc { return chain(t, 1) }, nil, false},
		{"server and proxy, the holder crashes", func(t *testing.T) []*proc { return chain(t, 1) }, nil, true},
		{"chain of two", func(t *testing.T) []*proc { return chain(t, 2) }, nil, false},
		{"at the server, chain of two", func(t *testing.T) []*proc {
			n := chain(t, 2)
			return []*proc{n[2], n[1], n[0]}
		}, nil, false},
		{"mesh of two", func(t *testing.T) []*proc {
			// Members link at the URLs they advertise, so this hop is not
			// slowed: the burst crosses it at the speed of loopback.
			common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", strings.Repeat("fe", 32), "--mesh-label", "inflight", "--mesh-profile", "local"}
			a := startProc(t, common...)
			b := startProc(t, append(common, "--join", meshAddr(t, a))...)
			waitMesh(t, []*proc{a, b})
			return []*proc{a, b}
		}, nil, false},
		{"interest regions", func(t *testing.T) []*proc { return chain(t, 1) },
			// The joiners see one another (y = 10), not the burst (y = 0).
			map[string]any{"interest": map[string]any{"min": []int{-1000, 5, -1000}, "max": []int{1000, 1000, 1000}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes(t)
			at := nodes[len(nodes)-1]
			b := sendBurst(t, at, 20000)
			time.Sleep(time.Second)
			if tc.crash {
				b.Drop()
			} else {
				b.Close()
			}
			_, m := httpGet(t, "http://"+nodes[0].Addr+"/metrics")
			held := metricValue(m, `solipsism_objects{role="server"}`)
			if held < 0 {
				held = metricValue(m, `solipsism_objects{role="proxy"}`)
			}
			t.Logf("the far end held %v objects when the holder left", held)

			ends := []*proc{nodes[0], at}
			peers := make([]peerAt, 40)
			var wg sync.WaitGroup
			for i := range peers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					node := ends[i%2]
					id := fmt.Sprintf("client-%08d-eagereag", i)
					p := wiretest.Dial(t, node.URL(), id, wiretest.Options{Eager: true, Extra: tc.extra})
					p.Change(wiretest.Add("obj-"+id, id, map[string]any{"n": i, "position": []int{i, 10, 0}}))
					peers[i] = peerAt{p, node}
				}()
			}
			wg.Wait()
			var missing []string
			deadline := time.Now().Add(25 * time.Second)
			for _, pa := range peers {
				err := pa.peer.WaitErr(time.Until(deadline), func(m map[string]wiretest.Object) bool {
					return countPrefix(m, "obj-") == 39
				})
				if err != nil {
					missing = append(missing, fmt.Sprintf("%s (on %s) sees %d of the 39 others", pa.peer.ID, pa.node.Addr, countPrefix(pa.peer.Objects(), "obj-")))
				}
			}
			if len(missing) > 0 {
				for _, n := range ends {
					t.Logf("%s holds %d objects of clients", n.Addr, countPrefix(worldOf(t, n), "obj-"))
				}
				t.Fatalf("%d of 40 clients miss others' objects 25 s on:\n%s", len(missing), strings.Join(missing, "\n"))
			}
			if tc.extra == nil {
				waitConverged(t, peers, 30*time.Second)
			} else {
				for _, pa := range peers {
					pa.peer.CheckClean()
				}
			}
			for _, n := range nodes {
				_, m := httpGet(t, "http://"+n.Addr+"/metrics")
				if r := repairsOf(m); r != 0 {
					t.Errorf("%s repaired %v objects: a divergence", n.Addr, r)
				}
			}
		})
	}
}

// sendBurst connects a peer to node and sends n objects in one message
// (a level load); it returns the peer, which stays.
func sendBurst(t *testing.T, node *proc, n int) *wiretest.Peer {
	t.Helper()
	b := wiretest.Dial(t, node.URL(), "burst-AAAAAAAA-AAAAAAAA", wiretest.Options{Forget: true})
	waitAsked(t, b)
	time.Sleep(50 * time.Millisecond)
	recs := make([]map[string]any, n)
	for i := range recs {
		recs[i] = wiretest.Add(fmt.Sprintf("b-%d", i), b.ID, map[string]any{"i": i, "position": []int{i % 100, 0, i / 100}})
	}
	b.Change(recs...)
	return b
}
