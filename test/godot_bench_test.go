package test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkGodotFrame: a headless Godot 3 process at 60 frames a second
// mirrors, with the addon (clients/godot), 500 objects that a Go client
// moves at 20 Hz (10,000 changes a second): the Godot process's CPU per
// frame and RSS, the time the addon takes a frame (polling, decoding,
// placing the nodes; mean and 99th percentile) and the frame's whole
// _process time as Godot counts it, beside the same process
// connected to an empty world, measured first in the same run. Godot has
// a core of its own; the node and the mover share the other.
//
//	go test ./test -run '^$' -bench GodotFrame -benchtime 1x
func BenchmarkGodotFrame(b *testing.B) {
	const objects = 500
	for range b.N {
		node := startNodeProc(b, "--tick", "50ms") // pinned to one core, Godot to the other
		p := node.node
		g := startGodot(b, "res://test/frame_bench.gd", "SOLIPSISM_URL="+p.URL(), "SOLIPSISM_OBJECTS="+strconv.Itoa(objects))
		if path, err := exec.LookPath("taskset"); err == nil && os.Getenv("SOLIPSISM_BENCH_NOPIN") == "" {
			// Godot alone on core 1; the node and this process (the
			// mover) on core 0.
			for cpu, pid := range map[string]int{"1": g.cmd.Process.Pid, "0": os.Getpid()} {
				if out, err := exec.Command(path, "-a", "-cp", cpu, strconv.Itoa(pid)).CombinedOutput(); err != nil {
					b.Fatalf("taskset: %v: %s", err, out)
				}
			}
			defer exec.Command(path, "-a", "-cp", "0,1", strconv.Itoa(os.Getpid())).Run()
		}
		g.expect(b, "CONNECTED ", 30*time.Second)
		cpu0, _ := procUsage(b, g.cmd.Process.Pid)
		at0 := time.Now()
		empty := strings.Fields(g.expect(b, "EMPTY ", 30*time.Second))
		cpu1, rss1 := procUsage(b, g.cmd.Process.Pid)
		emptyCPU := float64((cpu1 - cpu0).Milliseconds()) / time.Since(at0).Seconds()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		c := dialNode(b, ctx, p.URL(), "mover")
		ids := make([]string, objects)
		for i := range ids {
			id, err := c.Create(map[string]any{"kind": "crate", "position": []float64{float64(i % 25), 0, float64(i / 25)}})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = id
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // every object moves every 50 ms
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for k := 1; ; k++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for i, id := range ids {
					y := float64((k+i)%20) / 10
					c.Set(id, map[string]any{"position": []float64{float64(i % 25), y, float64(i / 25)}})
				}
			}
		}()
		g.expect(b, "FILLED ", time.Minute)
		cpu2, _ := procUsage(b, g.cmd.Process.Pid)
		at2 := time.Now()
		loaded := strings.Fields(g.expect(b, "LOADED ", time.Minute))
		cpu3, rss3 := procUsage(b, g.cmd.Process.Pid)
		loadedCPU := float64((cpu3 - cpu2).Milliseconds()) / time.Since(at2).Seconds()
		close(stop)
		wg.Wait()
		cancel()

		num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
		frames := num(loaded[2]) / 5 // a second's
		b.ReportMetric(loadedCPU/frames*1000, "godot-cpu-µs/frame")
		b.ReportMetric(emptyCPU/(num(empty[2])/3)*1000, "empty-godot-cpu-µs/frame")
		b.ReportMetric(num(empty[0]), "empty-addon-µs/frame")
		b.ReportMetric(num(loaded[0]), "addon-µs/frame")
		b.ReportMetric(num(loaded[1]), "p99-addon-µs/frame")
		b.ReportMetric(num(loaded[4]), "process-µs/frame")
		b.ReportMetric(num(loaded[3]), "changes/s")
		b.ReportMetric(emptyCPU, "empty-godot-cpu-ms/s")
		b.ReportMetric(loadedCPU, "godot-cpu-ms/s")
		b.ReportMetric(float64(rss3-rss1)/objects, "godot-rss-bytes/object")
		b.Logf("empty: %v µs mean, %v µs p99 over %v frames; %d objects moving: %v µs mean, %v µs p99 over %v frames, %v changes/s",
			empty[0], empty[1], empty[2], objects, loaded[0], loaded[1], loaded[2], loaded[3])
	}
}
