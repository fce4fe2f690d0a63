package snapshot

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// BenchmarkGafferCubes measures the snapshot wire against Gaffer on Games'
// line (901 cubes at 60 Hz within 256 kbit/s) over real UDP with real
// ticks: a node in this process sending 60 snapshots a second, 10 clients
// on UDP sockets of their own, and a writer moving objects through the
// node 60 times a second, each along a circle of its own (1 m radius,
// about 1 rad/s) and turning. Per client, over 5 s after every object has
// arrived: kbit/s of UDP payload, how many times a second each moving
// object's state reaches it (updates/object/s; 60 is every tick), and the
// bits a ghost update costs, the packets' headers included. Two worlds:
// 900 objects all moving (also within Options.MaxKbps 256), and 1,000 of
// which 100 move.
//
//	go test ./bridge/snapshot -run '^$' -bench GafferCubes -benchtime 1x
func BenchmarkGafferCubes(b *testing.B) {
	const clients, rate = 10, 60
	for _, tc := range []struct {
		name            string
		objects, moving int
		maxKbps         int
	}{{"900-moving", 900, 900, 0}, {"900-moving-within-256kbps", 900, 900, 256}, {"1000-of-which-100-move", 1000, 100, 0}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				p := startPlaceWith(b, Options{Rate: rate, MaxKbps: tc.maxKbps}, relay.Options{Tick: time.Second / rate})
				at := func(i, tick int) gameworld.Properties {
					cx, cz := float64(i%30)*3, float64(i/30)*3
					if i >= tc.moving {
						return transform(cx, cz, 0)
					}
					w := 1 + float64(i%7)*0.05 // rad/s
					a := w*float64(tick)/rate + float64(i)
					return transform(cx+math.Cos(a), cz+math.Sin(a), a)
				}
				ids := make([]string, tc.objects)
				var add []gameworld.Change
				for i := range ids {
					ids[i] = fmt.Sprintf("cube-%03d", i)
					add = append(add, gameworld.Change{Type: gameworld.Add, ID: ids[i], Properties: at(i, 0)})
				}
				if _, err := p.node.Apply(add); err != nil {
					b.Fatal(err)
				}
				cs := make([]*Client, clients)
				for i := range cs {
					cs[i] = dial(b, p.srv.Addr().String(), ClientOptions{})
				}
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() { // the writer: every moving object, every tick
					defer close(done)
					t := time.NewTicker(time.Second / rate)
					defer t.Stop()
					for tick := 1; ; tick++ {
						select {
						case <-stop:
							return
						case <-t.C:
						}
						ch := make([]gameworld.Change, tc.moving)
						for i := range ch {
							ch[i] = gameworld.Change{Type: gameworld.Update, ID: ids[i], Properties: at(i, tick)}
						}
						p.node.Apply(ch)
					}
				}()
				deadline := time.Now().Add(time.Minute)
				for _, c := range cs {
					for len(c.Objects()) < tc.objects {
						if time.Now().After(deadline) {
							b.Fatalf("a client holds %d objects of %d", len(c.Objects()), tc.objects)
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
				time.Sleep(time.Second)
				const window = 5 * time.Second
				type reading struct{ packets, bytes, updates uint64 }
				read := func() []reading {
					out := make([]reading, len(cs))
					for i, c := range cs {
						out[i].packets, out[i].bytes = c.Received()
						out[i].updates = c.Updates()
					}
					return out
				}
				tickOf := func() uint32 { p.srv.mu.Lock(); defer p.srv.mu.Unlock(); return p.srv.tick }
				r0, t0, k0 := read(), time.Now(), tickOf()
				time.Sleep(window)
				r1, secs, k1 := read(), time.Since(t0).Seconds(), tickOf()
				close(stop)
				<-done
				var kbps, rateUp, bits float64
				for i := range cs {
					db, du := float64(r1[i].bytes-r0[i].bytes), float64(r1[i].updates-r0[i].updates)
					kbps += db * 8 / secs / 1000
					rateUp += du / float64(tc.moving) / secs
					bits += db * 8 / max(du, 1)
				}
				b.ReportMetric(kbps/clients, "kbit/s/client")
				b.ReportMetric(rateUp/clients, "updates/object/s")
				b.ReportMetric(bits/clients, "bits/update")
				b.ReportMetric(float64(r1[0].packets-r0[0].packets)/secs, "packets/s/client")
				b.ReportMetric(float64(k1-k0)/secs, "server-ticks/s")
			}
		})
	}
}

// BenchmarkPredictionFloor measures what BenchmarkGafferCubes' motion
// costs with this wire's code at best, without a network: every object
// moving along its circle, each update coded in a compact group (the
// real codec; plus 2 bits for its id) against its values lag and lag+1
// ticks before, as if every tick were sent and acknowledged lag ticks
// later. At 1 mm and 0.001 (the transform type), and at Gaffer on Games'
// precisions (1/512 m, rotations in 9 bits a component). Also the
// entropy of the lanes' misses (each lane's distribution of value minus
// prediction): what an ideal coder of these predictions would spend on
// lanes alone, before ids and headers.
//
//	go test ./bridge/snapshot -run '^$' -bench PredictionFloor -benchtime 1x
func BenchmarkPredictionFloor(b *testing.B) {
	const objects, ticks, rate = 900, 300, 60
	for _, prec := range []struct {
		name     string
		pos, rot float64
	}{{"1mm", 0, 0}, {"gaffer", 1.0 / 512, math.Sqrt2 / 511}} {
		typ := GhostType{Name: "cube", Fields: []Field{{Property: "position", Kind: Vec3, Precision: prec.pos}, {Property: "rotation", Kind: Quat, Precision: prec.rot}}}
		for _, lag := range []uint32{1, 2, 3} {
			b.Run(fmt.Sprintf("%s/lag-%d", prec.name, lag), func(b *testing.B) {
				var w, data Writer
				bits, updates := 0, 0
				misses := make([]map[int32]int, 7)
				for l := range misses {
					misses[l] = map[int32]int{}
				}
				for range b.N {
					for i := range objects {
						hist := make([][]value, ticks)
						for tick := range hist {
							w := 1 + float64(i%7)*0.05
							a := w*float64(tick)/rate + float64(i)
							hist[tick] = typ.quantize(transform(math.Cos(a), math.Sin(a), a))
						}
						mask := uint32(3)
						for tick := lag + 1; tick < ticks; tick++ {
							t0, t1 := tick-lag, tick-lag-1
							b0, b1 := &base{vals: hist[t0], mask: mask}, &base{vals: hist[t1]}
							w.Reset()
							mask, _ = ghostCodec{tick: tick, t0: t0, t1: t1, compact: true}.encode(&w, &data, &typ, hist[tick], b0, b1, nil)
							bits += w.Bits() + 2
							updates++
							codec := ghostCodec{tick: tick, t0: t0, t1: t1}
							for l := range 7 {
								f, k := 0, l // position's three lanes, then rotation's four
								if l >= 3 {
									f, k = 1, l-3
								}
								pred := codec.predict(hist[t0][f].lanes[k], hist[t1][f].lanes[k])
								if f == 1 && k == 0 {
									pred = hist[t0][f].lanes[k] // (the index: b0's)
								}
								misses[l][hist[tick][f].lanes[k]-pred]++
							}
						}
					}
				}
				entropy := 0.0
				for _, m := range misses {
					for _, n := range m {
						p := float64(n) / float64(updates)
						entropy -= p * math.Log2(p)
					}
				}
				b.ReportMetric(float64(bits)/float64(updates), "bits/update")
				b.ReportMetric(entropy, "lane-entropy-bits/update")
			})
		}
	}
}
