package snapshot

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshot: 1,000 objects with position and rotation, 100 of them
// moving every tick (vehicles: steady speed, turning), 100 clients at 60
// Hz that acknowledge every snapshot. Reports bits per changed object,
// bits per unchanged relevant object (the whole rest of the packet,
// header included, spread over them), kbit/s per client, process CPU per
// tick for all 100 clients (encoding and sending on a UDP socket) and as a
// share of a core at 60 Hz, and the size of the same changes as a JSON
// merge patch.
//
//	go test ./bridge/snapshot -run '^$' -bench Snapshot -benchtime 600x
func BenchmarkSnapshot(b *testing.B) {
	const objects, moving, clients = 1000, 100, 100
	s := &Server{types: []GhostType{GenericType, TransformType}, objects: map[string]*ghost{}, byName: map[string]int{}, tick: 1}
	for i, t := range s.types {
		s.hashes = append(s.hashes, t.Hash())
		s.byName[t.Name] = i
	}
	props := func(i, tick int) gameworld.Properties {
		x, z, yaw := float64(i%40)*3, float64(i/40)*3, float64(i)*0.1
		if i < moving {
			speed, turn := 2.0/60, 0.5/60 // 2 m/s, 0.5 rad/s
			yaw += turn * float64(tick)
			x += speed * float64(tick) * math.Cos(float64(i))
			z += speed * float64(tick) * math.Sin(float64(i))
		}
		return transform(x, z, yaw)
	}
	for i := range objects {
		s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("obj-%04d", i)}, After: props(i, 0)})
	}
	conns := make([]*conn, clients)
	for i := range conns {
		conns[i] = &conn{despawns: map[uint32]bool{}, loaded: 2}
	}
	// Packets go out through a real UDP socket, to one nobody reads.
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	out, err := net.DialUDP("udp", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	var w Writer
	step := func(tick int) (bits, ghosts, ghostBits int) {
		s.tick = uint32(tick)
		for i := range moving {
			s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: fmt.Sprintf("obj-%04d", i)}, After: props(i, tick)})
		}
		for _, c := range conns {
			w.Reset()
			g, gb := s.snapshotLocked(c, &w)
			out.Write(w.Bytes())
			s.ackLocked(c, uint32(tick), ^uint32(0))
			bits, ghosts, ghostBits = bits+w.Bits(), ghosts+g, ghostBits+gb
		}
		return
	}
	tick := 1
	for ; tick < 200; tick++ { // every ghost spawned and acknowledged twice
		step(tick)
	}
	var bits, ghosts, ghostBits, jsonBytes int
	cpu0 := cpuTime()
	for b.Loop() {
		tick++
		bt, g, gb := step(tick)
		bits, ghosts, ghostBits = bits+bt, ghosts+g, ghostBits+gb
	}
	cpu := cpuTime() - cpu0
	// The same changes as a merge patch of a JSON document of entities.
	patch := map[string]any{}
	for i := range moving {
		p := props(i, tick)
		patch[fmt.Sprintf("obj-%04d", i)] = map[string]any{"components": map[string]json.RawMessage{"position": p.Value("position"), "rotation": p.Value("rotation")}}
	}
	enc, _ := json.Marshal(map[string]any{"entities": patch})
	jsonBytes = len(enc)

	n := float64(b.N)
	perClient := float64(bits) / n / clients
	changed := float64(ghostBits) / float64(ghosts)
	b.ReportMetric(changed, "bits/changed")
	b.ReportMetric((perClient-changed*moving)/(objects-moving), "bits/unchanged")
	b.ReportMetric(perClient*60/1000, "kbit/s/client")
	b.ReportMetric(float64(jsonBytes*8)/perClient, "json/snapshot")
	b.ReportMetric(float64(cpu.Microseconds())/n/1000, "cpu-ms/tick")
	b.ReportMetric(float64(cpu)/n*60/float64(time.Second), "cores@60Hz")
	b.ReportMetric(float64(ghosts)/n/clients, "ghosts/packet")
}
