package test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// counter is a receiver that counts what it is delivered.
type counter struct{ recs, bytes atomic.Int64 }

func (c *counter) Receive(ds []relay.Delivery) {
	var n int64
	for _, d := range ds {
		n += int64(len(d.ID) + 40)
		for k, v := range d.Properties.All() {
			n += int64(len(k) + len(v) + 4)
		}
	}
	c.recs.Add(int64(len(ds)))
	c.bytes.Add(n)
}

// moveWorld applies one tick of movement to every object: a step of up
// to 2 units along x and z, staying inside size × size.
func moveWorld(b *testing.B, n *relay.Node, pos [][3]float64, r *rand.Rand, size float64) {
	changes := make([]gameworld.Change, len(pos))
	for i := range pos {
		for _, a := range []int{0, 2} {
			pos[i][a] = min(max(pos[i][a]+r.Float64()*4-2, 0), size)
		}
		p, _ := json.Marshal(pos[i])
		changes[i] = gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("o%05d", i), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": p})}
	}
	if _, err := n.Apply(changes); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkInterest: 10,000 objects spread uniformly over 1000 × 1000, all
// moving every 50 ms tick; clients joined in-process (relay.Attach, the
// same routing as links, without the network) each with a region of 1% of
// the world, or none. Reports records and bytes delivered per client per
// second, and the node's time per tick (applying and routing), for:
// 200 clients with regions, 50 with regions, 200 whose regions are all
// in a corner without objects, and 5 without regions (per client, what
// every client receives without interest).
//
//	go test ./test -run '^$' -bench Interest -benchtime 1x
func BenchmarkInterest(b *testing.B) {
	const objects, size, tick, ticks = 10000, 1000.0, 50 * time.Millisecond, 40
	cases := []struct {
		name    string
		clients int
		region  func(r *rand.Rand) []peer.Box
	}{
		{"regions-200", 200, func(r *rand.Rand) []peer.Box {
			x, z := r.Float64()*900, r.Float64()*900
			return []peer.Box{{Min: [3]float64{x, -10, z}, Max: [3]float64{x + 100, 10, z + 100}}}
		}},
		{"regions-50", 50, func(r *rand.Rand) []peer.Box {
			x, z := r.Float64()*900, r.Float64()*900
			return []peer.Box{{Min: [3]float64{x, -10, z}, Max: [3]float64{x + 100, 10, z + 100}}}
		}},
		{"empty-regions-200", 200, func(r *rand.Rand) []peer.Box {
			return []peer.Box{{Min: [3]float64{5000, -10, 5000}, Max: [3]float64{5100, 10, 5100}}}
		}},
		{"everything-5", 5, nil},
	}
	if only := os.Getenv("SOLIPSISM_BENCH_CASE"); only != "" {
		cases = slices.DeleteFunc(cases, func(c struct {
			name    string
			clients int
			region  func(r *rand.Rand) []peer.Box
		}) bool {
			return c.name != only
		})
	}
	for i := 0; i < b.N; i++ {
		perClient := map[string]float64{}
		for _, c := range cases {
			reg := prometheus.NewRegistry()
			n, err := relay.New(relay.Options{Tick: tick, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			pos := make([][3]float64, objects)
			adds := make([]gameworld.Change, objects)
			for k := range pos {
				pos[k] = [3]float64{r.Float64() * size, 0, r.Float64() * size}
				p, _ := json.Marshal(pos[k])
				adds[k] = gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o%05d", k), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": p, "kind": json.RawMessage(`"crate"`)})}
			}
			n.Apply(adds)
			counters := make([]*counter, c.clients)
			for k := range counters {
				counters[k] = &counter{}
				opts := relay.AttachOptions{Receiver: counters[k]}
				if c.region != nil {
					opts.Interest, opts.HasInterest = c.region(r), true
				}
				if _, err := n.Attach(opts); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(2 * tick) // refreshes done
			sum0, count0 := tickSum(b, reg)
			var recs0, bytes0 int64
			for _, ct := range counters {
				recs0 += ct.recs.Load()
				bytes0 += ct.bytes.Load()
			}
			start := time.Now()
			var busy time.Duration
			for range ticks {
				t0 := time.Now()
				moveWorld(b, n, pos, r, size)
				busy += time.Since(t0)
				time.Sleep(tick - time.Since(t0)%tick)
			}
			time.Sleep(tick) // the last flush
			secs := time.Since(start).Seconds()
			var recs, bytes int64
			for _, ct := range counters {
				recs += ct.recs.Load()
				bytes += ct.bytes.Load()
			}
			recs, bytes = recs-recs0, bytes-bytes0
			sum1, count1 := tickSum(b, reg)
			st := time.Duration((sum1 - sum0) / float64(count1-count0) * float64(time.Second))
			rps := float64(recs) / secs / float64(c.clients)
			perClient[c.name] = rps
			b.ReportMetric(rps, c.name+"-records/s/client")
			b.ReportMetric(float64(bytes)/secs/float64(c.clients), c.name+"-bytes/s/client")
			b.ReportMetric(st.Seconds()*1000, c.name+"-flush-ms/tick")
			b.Logf("%s: %.0f records/s and %.0f bytes/s per client; flush %.2f ms per tick, applying %.1f ms per tick",
				c.name, rps, float64(bytes)/secs/float64(c.clients), st.Seconds()*1000, busy.Seconds()*1000/ticks)
			n.Close(b.Context())
		}
		b.ReportMetric(perClient["everything-5"]/perClient["regions-200"], "fewer-records-x")
	}
}

// tickSum returns the sum (seconds) and count of a registry's
// tick-duration histogram.
func tickSum(b *testing.B, reg *prometheus.Registry) (float64, uint64) {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "solipsism_tick_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	return 0, 0
}

// BenchmarkMeshInterest: four server nodes in one mesh on loopback, each
// owning 1,000 objects that move every 50 ms tick: 950 in its quadrant of
// the world, 50 travellers anywhere in it. Each node has 20 clients
// (in-process attachments) looking at its own quadrant, or at everything. Reports the records that cross mesh links
// per second, with regions and without, and their ratio.
//
//	go test ./test -run '^$' -bench MeshInterest -benchtime 1x
func BenchmarkMeshInterest(b *testing.B) {
	const perNode, clients, tick, ticks = 1000, 20, 50 * time.Millisecond, 40
	for i := 0; i < b.N; i++ {
		cross := map[bool]float64{}
		for _, regions := range []bool{false, true} {
			var nodes []*relay.Node
			var seed string
			for j := range 4 {
				n, url := startBenchNode(b, relay.Options{Tick: tick})
				mo := cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: url, Profile: "local"}
				if seed != "" {
					mo.Join = []string{seed}
				}
				m, err := cluster.Join(n, mo)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Close() })
				if seed == "" {
					seed = m.Addr()
				}
				nodes = append(nodes, n)
				x0, z0 := float64(j%2)*500, float64(j/2)*500
				for range clients {
					opts := relay.AttachOptions{Receiver: &counter{}}
					if regions {
						opts.Interest, opts.HasInterest = []peer.Box{{Min: [3]float64{x0, -10, z0}, Max: [3]float64{x0 + 500, 10, z0 + 500}}}, true
					}
					if _, err := n.Attach(opts); err != nil {
						b.Fatal(err)
					}
				}
			}
			waitMeshLinks(b, nodes)
			r := rand.New(rand.NewPCG(3, 4))
			pos := make([][][3]float64, 4)
			for j, n := range nodes {
				x0, z0 := float64(j%2)*500, float64(j/2)*500
				pos[j] = make([][3]float64, perNode)
				adds := make([]gameworld.Change, perNode)
				for k := range pos[j] {
					pos[j][k] = [3]float64{x0 + 10 + r.Float64()*480, 0, z0 + 10 + r.Float64()*480}
					if k < perNode/20 { // a traveller
						pos[j][k] = [3]float64{r.Float64() * 1000, 0, r.Float64() * 1000}
					}
					p, _ := json.Marshal(pos[j][k])
					adds[k] = gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("n%d-o%04d", j, k), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": p})}
				}
				n.Apply(adds)
			}
			time.Sleep(500 * time.Millisecond)
			meshIn := func() uint64 { return meshRecordsIn(nodes) }
			in0, start := meshIn(), time.Now()
			for range ticks {
				t0 := time.Now()
				for j, n := range nodes {
					changes := make([]gameworld.Change, perNode)
					for k := range pos[j] {
						pos[j][k][0] += r.Float64()*2 - 1 // small steps, staying in the quadrant
						p, _ := json.Marshal(pos[j][k])
						changes[k] = gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("n%d-o%04d", j, k), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": p})}
					}
					n.Apply(changes)
				}
				time.Sleep(tick - time.Since(t0)%tick)
			}
			time.Sleep(2 * tick)
			rate := float64(meshIn()-in0) / time.Since(start).Seconds()
			cross[regions] = rate
			name := "everything"
			if regions {
				name = "quadrants"
			}
			b.ReportMetric(rate, name+"-cross-node-records/s")
			for _, n := range nodes {
				n.Close(b.Context())
			}
		}
		b.ReportMetric(cross[false]/max(cross[true], 1), "fewer-x")
	}
}
