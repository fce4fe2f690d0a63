package enet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cBench builds testdata/bench.c, or skips.
func cBench(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "bench")
	if out, err := exec.Command("cc", "-O2", "-o", bin, "testdata/bench.c", "-lenet").CombinedOutput(); err != nil {
		b.Skipf("needs a C compiler and libenet-dev: %v\n%s", err, out)
	}
	return bin
}

// echoServer serves Go ENet peers that echo every packet reliably.
func echoServer(b *testing.B) *Host {
	h, err := Listen("127.0.0.1:0", Options{MaxPeers: 2048})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			p, err := h.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					pk, err := p.Receive(context.Background())
					if err != nil {
						return
					}
					p.Send(pk.Channel, pk.Data, Reliable)
				}
			}()
		}
	}()
	return h
}

func freeUDPPort(b *testing.B) int {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.LocalAddr().(*net.UDPAddr).Port
}

// runBench runs the C client against port and parses its results.
func runBench(b *testing.B, bin string, port int, n int) (p50, p99, perSec float64) {
	out, err := exec.Command(bin, "client", "127.0.0.1", fmt.Sprint(port), fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		b.Fatalf("C client: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "latency") {
			fmt.Sscanf(l, "latency p50=%f p99=%f", &p50, &p99)
		}
		if strings.HasPrefix(l, "throughput") {
			fmt.Sscanf(l, "throughput %f", &perSec)
		}
	}
	return
}

// BenchmarkENet: the reference C client against our server and, in the
// same run, against the C library's own server: reliable round trips
// (p50, p99) and pipelined reliable messages per second; then the memory
// our server holds per idle peer (1,000 connected by one C process).
//
//	go test ./enet -run '^$' -bench ENet -benchtime 1x
func BenchmarkENet(b *testing.B) {
	bin := cBench(b)
	const n = 20000
	for i := 0; i < b.N; i++ {
		h := echoServer(b)
		port := h.Addr().(*net.UDPAddr).Port
		gp50, gp99, gps := runBench(b, bin, port, n)
		h.Close()

		cport := freeUDPPort(b)
		echo := exec.Command(bin, "echo", fmt.Sprint(cport))
		out, _ := echo.StdoutPipe()
		if err := echo.Start(); err != nil {
			b.Fatal(err)
		}
		bufio.NewReader(out).ReadString('\n')
		cp50, cp99, cps := runBench(b, bin, cport, n)
		echo.Process.Kill()
		echo.Wait()

		b.ReportMetric(gps, "go-server-msgs/s")
		b.ReportMetric(cps, "c-server-msgs/s")
		b.ReportMetric(gps/cps, "go/c-throughput")
		b.ReportMetric(gp50, "go-p50-ms")
		b.ReportMetric(gp99, "go-p99-ms")
		b.ReportMetric(cp50, "c-p50-ms")
		b.ReportMetric(cp99, "c-p99-ms")

		// Idle peers.
		h = echoServer(b)
		runtime.GC()
		rss0, heap0 := rss(b), heapAlloc()
		idle := exec.Command(bin, "idle", "127.0.0.1", fmt.Sprint(h.Addr().(*net.UDPAddr).Port), "1000")
		stdin, _ := idle.StdinPipe()
		iout, _ := idle.StdoutPipe()
		if err := idle.Start(); err != nil {
			b.Fatal(err)
		}
		line, _ := bufio.NewReader(iout).ReadString('\n')
		if !strings.HasPrefix(line, "connected 1000") {
			b.Fatalf("idle client: %q", line)
		}
		time.Sleep(2 * time.Second)
		runtime.GC()
		rss1, heap1 := rss(b), heapAlloc()
		b.ReportMetric(float64(rss1-rss0)/1000, "idle-RSS-B/peer")
		b.ReportMetric(float64(heap1-heap0)/1000, "idle-heap-B/peer")
		stdin.Close()
		idle.Wait()
		h.Close()
	}
}

func heapAlloc() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rss reads this process's resident set size.
func rss(b *testing.B) int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
