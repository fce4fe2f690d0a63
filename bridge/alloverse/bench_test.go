package alloverse

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

const (
	benchEntities = 10000
	benchChanging = benchEntities / 100 // 1% per heartbeat
)

// benchWorld returns a state of 10,000 entities, each with a 16-float
// transform and two small components, and a function that moves 1% of
// them and commits a revision.
func benchWorld(style PatchStyle) (*state, func()) {
	s := newState(0, DefaultHistory, style)
	r := rand.New(rand.NewPCG(1, 1))
	transform := func() json.RawMessage {
		m := make([]float64, 16)
		for i := range m {
			m[i] = float64(r.IntN(100000)) / 1000
		}
		b, _ := json.Marshal(m)
		return b
	}
	ids := make([]string, benchEntities)
	for i := range ids {
		ids[i] = fmt.Sprintf("entity-%05d", i)
		p := gameworld.PropertiesOf(map[string]json.RawMessage{
			"transform": transform(),
			"geometry":  json.RawMessage(`{"type":"inline","name":"box"}`),
			"grabbable": json.RawMessage(`{"grabbable":true}`),
		})
		s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: ids[i]}, After: p})
	}
	s.commit()
	step := func() {
		for range benchChanging {
			id := ids[r.IntN(len(ids))]
			p := gameworld.PropertiesOf(map[string]json.RawMessage{})
			for k, v := range s.entities[id].comps {
				p = p.With(k, v)
			}
			p = p.With("transform", transform())
			s.apply(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: id}, After: p})
		}
		s.commit()
	}
	return s, step
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDiff: 10,000 entities, 1% changing per heartbeat. Reports the
// time to build one heartbeat's diff from the change sets, the time
// evanphx/json-patch's CreateMergePatch takes over the two whole
// documents, their ratio, and the bytes of a merge, an apply and a set.
//
//	go test ./bridge/alloverse -run '^$' -bench 'Diff|Serve' -benchtime 100x
func BenchmarkDiff(b *testing.B) {
	s, step := benchWorld(Smallest)
	var ours, lib time.Duration
	var mergeBytes, applyBytes, setBytes int
	for b.Loop() {
		base, old := s.rev, docOf(s)
		step()
		t0 := time.Now()
		changes := s.changesSince(base)
		ids := slices.Sorted(maps.Keys(changes))
		merge, _ := s.mergePacket(base, ids, changes, s.entity)
		ours += time.Since(t0)
		apply := s.applyPacket(base, ids, changes, s.entity)
		now := docOf(s)
		t1 := time.Now()
		if _, err := jsonpatch.CreateMergePatch(old, now); err != nil {
			b.Fatal(err)
		}
		lib += time.Since(t1)
		mergeBytes, applyBytes, setBytes = len(merge), len(apply), len(s.setPacket())
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.Nanoseconds())/n, "ns/diff")
	b.ReportMetric(float64(lib.Nanoseconds())/n, "ns/CreateMergePatch")
	b.ReportMetric(float64(lib)/float64(ours), "speedup")
	b.ReportMetric(float64(mergeBytes), "merge-B")
	b.ReportMetric(float64(applyBytes), "apply-B")
	b.ReportMetric(float64(setBytes), "set-B")
	b.ReportMetric(100*float64(min(mergeBytes, applyBytes))/float64(setBytes), "diff-%-of-set")
}

// nullConn is a Conn that takes packets and drops them, for measuring
// the bridge alone.
type nullConn struct{ bytes int }

func (c *nullConn) SendState(p []byte)       { c.bytes += len(p) }
func (c *nullConn) Send([]byte) error        { return nil }
func (c *nullConn) Close(StatusCode, string) {}

// BenchmarkServe: a heartbeat of a place with 10,000 entities, 1%
// changing, and 100 clients whose acknowledgements are spread over the
// history (a tenth of them current, one in fifty asking for a set).
// Reports process CPU per heartbeat and bytes sent per heartbeat.
func BenchmarkServe(b *testing.B) {
	s, step := benchWorld(Smallest)
	br := &Bridge{st: s, sessions: map[*Session]struct{}{}}
	conns := make([]*nullConn, 100)
	sessions := make([]*Session, 100)
	for i := range conns {
		conns[i] = &nullConn{}
		sessions[i] = &Session{b: br, conn: conns[i]}
		br.sessions[sessions[i]] = struct{}{}
	}
	for range DefaultHistory {
		step()
	}
	r := rand.New(rand.NewPCG(2, 2))
	cpu0 := cpuTime()
	for b.Loop() {
		for i, ss := range sessions {
			switch {
			case i%50 == 0:
				ss.ack = 0
			case i%10 == 0:
				ss.ack = s.rev
			default:
				ss.ack = s.rev - uint64(1+r.IntN(DefaultHistory/4))
			}
		}
		step()
		for ss := range br.sessions {
			if p := s.packet(ss.ack); p != nil {
				ss.conn.SendState(p)
			}
		}
	}
	cpu := cpuTime() - cpu0
	sent := 0
	for _, c := range conns {
		sent += c.bytes
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/heartbeat")
	b.ReportMetric(float64(sent)/float64(b.N), "B/heartbeat")
}

// placeDoc is a place's document of n entities, and a merge patch that
// removes every other one and changes the rest.
func placeDoc(n int) (doc, patch []byte) {
	var d, p []byte
	d, p = append(d, `{"entities":{`...), append(p, `{"entities":{`...)
	for i := range n {
		if i > 0 {
			d, p = append(d, ','), append(p, ',')
		}
		d = fmt.Appendf(d, `"e-%d":{"id":"e-%d","components":{"n":%d,"position":[%d,0,%d]}}`, i, i, i, i%100, i/100)
		if i%2 == 0 {
			p = fmt.Appendf(p, `"e-%d":null`, i)
		} else {
			p = fmt.Appendf(p, `"e-%d":{"components":{"n":-%d}}`, i, i)
		}
	}
	return append(d, `},"revision":1}`...), append(p, `},"revision":2}`...)
}

// BenchmarkMergePatch: a merge patch that touches every entity of a big
// place (a burst leaving), as a client takes it: ours at 100,000 entities,
// and both ours and evanphx/json-patch's at 10,000 (the library's cost
// grows with the square of the entities: at 100,000 it takes minutes).
//
//	go test ./bridge/alloverse -run '^$' -bench MergePatch -benchtime 3x
func BenchmarkMergePatch(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		doc, patch := placeDoc(n)
		b.Run(fmt.Sprint("ours/", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := MergePatch(doc, patch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(doc))/(1<<20), "doc-MiB")
		})
		if n > 10000 {
			continue
		}
		b.Run(fmt.Sprint("evanphx/", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := jsonpatch.MergePatch(doc, patch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
