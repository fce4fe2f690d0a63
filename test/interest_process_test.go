package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/peer"
)

// TestMeshInterest: three node processes in a mesh, each with a client in
// its own third of the world. A node receives no changes of objects
// outside its clients' regions, and a client that moves its region across
// receives the other node's objects.
func TestMeshInterest(t *testing.T) {
	secret := strings.Repeat("cd", 32)
	common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "interest", "--mesh-profile", "local", "--tick", "10ms"}
	a := startProc(t, common...)
	seed := meshAddr(t, a)
	procs := []*proc{a, startProc(t, append(common, "--join", seed)...), startProc(t, append(common, "--join", seed)...)}
	waitMesh(t, procs)
	third := func(i int) peer.Box {
		return peer.Box{Min: [3]float64{float64(i) * 100, -1000, -1000}, Max: [3]float64{float64(i)*100 + 100, 1000, 1000}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*client.Client, 3)
	for i, p := range procs {
		c, err := client.Dial(ctx, p.URL(), client.Options{Prefix: fmt.Sprintf("player%d", i), Tick: 10 * time.Millisecond, Interest: []peer.Box{third(i)}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
		for k := range 5 {
			c.CreateWithID(fmt.Sprintf("thing-%d-%d", i, k), map[string]any{"position": []float64{float64(i)*100 + 50 + float64(k), 0, 0}})
		}
	}
	// A wanderer on node 1 that walks through node 0's third.
	clients[1].CreateWithID("wanderer", map[string]any{"position": []float64{150, 0, 0}})
	for i, p := range procs {
		deadline := time.Now().Add(10 * time.Second)
		for len(objectsOf(t, p)) < 5 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d has %v", i, objectsOf(t, p))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Movement inside node 1's third reaches no other node.
	meshIn := func(p *proc) float64 {
		_, m := httpGet(t, "http://"+p.Addr+"/metrics")
		return metricValue(m, `solipsism_mesh_change_records_total{direction="in",role="server"}`)
	}
	before := []float64{meshIn(procs[0]), meshIn(procs[2])}
	for step := range 50 {
		clients[1].Set("thing-1-0", map[string]any{"position": []float64{150 + float64(step%10), 0, 0}})
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	for i, p := range []*proc{procs[0], procs[2]} {
		if got := meshIn(p) - before[i]; got > 0 {
			t.Errorf("a node without interest in the moving object received %v mesh records", got)
		}
	}
	for i, p := range procs {
		for id := range objectsOf(t, p) {
			var owner int
			if _, err := fmt.Sscanf(id, "thing-%d-", &owner); err == nil && owner != i {
				t.Errorf("node %d holds %s, outside its clients' regions", i, id)
			}
		}
	}

	// The wanderer walks into node 0's third: node 0 and its client get it.
	clients[1].Set("wanderer", map[string]any{"position": []float64{50, 0, 0}})
	waitObject(t, clients[0], "wanderer", true)
	// Client 2 looks at node 0's third: it receives node 0's objects.
	clients[2].SetInterest([]peer.Box{third(0)})
	waitObject(t, clients[2], "thing-0-3", true)
	waitObject(t, clients[2], "thing-2-3", true) // its own objects stay in its world, wherever they are
}

func waitObject(t *testing.T, c *client.Client, id string, present bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := c.World().Get(id); ok == present {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s present=%v never came true", id, present)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
