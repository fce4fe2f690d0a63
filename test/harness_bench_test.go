package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/relay"
)

// Benchmarks' harness: the node and the bare relay as processes pinned to a
// core, the load tool, and what users pay read from /proc (CPU, RSS).

// loadBinary builds the load tool once per run.
func loadBinary(tb testing.TB) string { return binary(tb, "solipsism-load") }

// startBenchNode runs a node in this process, so that its CPU time and heap
// can be measured while the load runs in another process.
func startBenchNode(tb testing.TB, opts relay.Options) (*relay.Node, string) {
	tb.Helper()
	// Every load client comes from 127.0.0.1: no per-address limit.
	opts.Quotas.ConnectionsPerIP = -1
	n, err := relay.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	srv := httptest.NewServer(mux)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
		srv.Close()
	})
	return n, wiretest.WSURL(srv)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type loadReport struct {
	Delivered     int64   `json:"delivered"`
	DeliveredPerS float64 `json:"delivered_per_second"`
	Samples       int     `json:"latency_samples"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error"`
	Reconnects    int64   `json:"reconnects"`
	Sent          int64   `json:"sent"`
	BytesPerS     float64 `json:"bytes_per_second"`
	Seconds       float64 `json:"seconds"`
	// What --check, --allo and --snapshot report.
	Checked              int `json:"checked"`
	Inconsistent         int `json:"inconsistent"`
	AlloClients          int `json:"allo_clients"`
	AlloInconsistent     int `json:"allo_inconsistent"`
	SnapshotClients      int `json:"snapshot_clients"`
	SnapshotInconsistent int `json:"snapshot_inconsistent"`
	// Objects a bridged client held at the check, on average.
	AlloHeld     float64 `json:"allo_held"`
	SnapshotHeld float64 `json:"snapshot_held"`
	// What the crowd scenarios add (--near).
	BytesPerClient float64 `json:"bytes_per_client_per_second"`
	NearP99ms      float64 `json:"near_p99_ms"`
	FarStaleP99ms  float64 `json:"far_stale_p99_ms"`
	FarStaleMaxMs  float64 `json:"far_stale_max_ms"`
	FarBehindP99ms float64 `json:"far_behind_p99_ms"`
	Repairs        float64 `json:"repairs"`
}

// startLoad runs the load tool in the background, for traffic that is not
// itself measured; it ends when its window does.
func startLoad(tb testing.TB, url string, args ...string) {
	tb.Helper()
	cmd := exec.Command(loadBinary(tb), append([]string{"--url", url}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// runLoad runs the load tool against url and measures this process's CPU
// time over the tool's measured window.
func runLoad(tb testing.TB, url string, args ...string) (loadReport, time.Duration) {
	tb.Helper()
	return runLoadHook(tb, url, nil, args...)
}

// runLoadHook is runLoad calling atStart when the measured window opens.
func runLoadHook(tb testing.TB, url string, atStart func(), args ...string) (loadReport, time.Duration) {
	tb.Helper()
	return measureLoad(tb, exec.Command(loadBinary(tb), append([]string{"--url", url, "--json"}, args...)...), cpuTime, atStart)
}

// measureLoad runs a load tool command and returns its report and the CPU
// time cpu() measures over the tool's window, calling atStart (if not nil)
// when the window opens.
func measureLoad(tb testing.TB, cmd *exec.Cmd, cpu func() time.Duration, atStart func()) (loadReport, time.Duration) {
	tb.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var rep loadReport
	var cpu0, used time.Duration
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20) // the report carries its timeline
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "measuring":
			cpu0 = cpu()
			if atStart != nil {
				atStart()
			}
		case line == "measured":
			used = cpu() - cpu0
		case strings.HasPrefix(line, "{"):
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("load tool: %v", err)
	}
	return rep, used
}

// waitMeshLinks waits until every pair of in-process mesh nodes is linked
// both ways.
func waitMeshLinks(tb testing.TB, nodes []*relay.Node) {
	tb.Helper()
	want := len(nodes) * (len(nodes) - 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		linked := 0
		for _, n := range nodes {
			for _, l := range n.Links() {
				if l.Kind == "mesh" && l.Ready {
					linked++
				}
			}
		}
		if linked == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("mesh did not form: %d of %d link ends", linked, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// meshRecordsIn sums the records in-process nodes received over mesh links.
func meshRecordsIn(nodes []*relay.Node) uint64 {
	var sum uint64
	for _, n := range nodes {
		for _, l := range n.Links() {
			if l.Kind == "mesh" {
				sum += l.RecordsIn
			}
		}
	}
	return sum
}

// relayProc is a relay running as a process of its own, so that its CPU
// time and resident memory can be read from /proc: what users pay.
type relayProc struct {
	pid  int
	addr string // host:port
	node *proc  // nil for the bare relay
}

func (r relayProc) url() string { return "ws://" + r.addr + "/ws" }

// pinned prefixes a command with taskset when it is available, so that the
// relay and the load each have a core of their own.
func pinned(cpu string, name string, args ...string) *exec.Cmd {
	if path, err := exec.LookPath("taskset"); err == nil && os.Getenv("SOLIPSISM_BENCH_NOPIN") == "" {
		return exec.Command(path, append([]string{"-c", cpu, name}, args...)...)
	}
	return exec.Command(name, args...)
}

// startBareRelay runs the test binary as the bare relay (see TestMain).
func startBareRelay(tb testing.TB, tick time.Duration) relayProc {
	tb.Helper()
	cmd := pinned("0", os.Args[0])
	cmd.Env = append(os.Environ(), "SOLIPSISM_BARE_RELAY=1", fmt.Sprintf("SOLIPSISM_BARE_RELAY_TICK=%d", tick.Milliseconds()))
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		tb.Fatal("bare relay did not start")
	}
	go io.Copy(io.Discard, out)
	return relayProc{pid: cmd.Process.Pid, addr: sc.Text()}
}

// startNodeProc runs solipsism-node, pinned like the bare relay.
func startNodeProc(tb testing.TB, args ...string) relayProc {
	tb.Helper()
	p := startProcEnv(tb, []string{"SOLIPSISM_LOG_LEVEL=info"}, args...)
	if path, err := exec.LookPath("taskset"); err == nil && os.Getenv("SOLIPSISM_BENCH_NOPIN") == "" {
		// -a: every thread the runtime has started so far; later ones
		// inherit the mask.
		if out, err := exec.Command(path, "-a", "-cp", "0", fmt.Sprint(p.cmd.Process.Pid)).CombinedOutput(); err != nil {
			tb.Fatalf("taskset: %v: %s", err, out)
		}
	}
	return relayProc{pid: p.cmd.Process.Pid, addr: p.Addr, node: p}
}

// startRelay starts the bare relay ("bare") or the node ("node", with its
// pprof listener for heap readings), both with a 50 ms tick.
func startRelay(tb testing.TB, which string) relayProc {
	if which == "bare" {
		return startBareRelay(tb, 50*time.Millisecond)
	}
	// Every load client comes from 127.0.0.1: no per-address limit.
	return startNodeProc(tb, "--tick", "50ms", "--debug-listen", "127.0.0.1:0", "--max-conns-per-ip", "-1")
}

// procUsage reads a process's CPU time (user+system) and RSS from /proc.
func procUsage(tb testing.TB, pid int) (time.Duration, int64) {
	tb.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(status)
	rss, _ := strconv.ParseInt(string(m[1]), 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration((utime + stime) * int64(time.Second) / clkTck), rss << 10
}

// loadOn runs the load tool (pinned to the other core) against r and
// returns its report and r's CPU time over the measured window.
func loadOn(tb testing.TB, r relayProc, args ...string) (loadReport, time.Duration) {
	tb.Helper()
	cmd := pinned("1", loadBinary(tb), append([]string{"--url", r.url(), "--json"}, args...)...)
	return measureLoad(tb, cmd, func() time.Duration { c, _ := procUsage(tb, r.pid); return c }, nil)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchRounds is how many interleaved rounds a comparison runs
// (SOLIPSISM_BENCH_ROUNDS, default 3): the machine is shared and noisy, so
// the node and the baseline take turns and medians are compared.
func benchRounds() int {
	if n, err := strconv.Atoi(os.Getenv("SOLIPSISM_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// nodeMetric reads an unlabelled metric from a node's /metrics.
func nodeMetric(tb testing.TB, r relayProc, name string) float64 {
	tb.Helper()
	_, body := httpGet(tb, "http://"+r.addr+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)`).FindStringSubmatch(body)
	if m == nil {
		tb.Fatalf("no %s in /metrics", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// debugAddr returns the host:port of a node's --debug-listen server.
func debugAddr(tb testing.TB, r relayProc) string {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m := debugAddrRE.FindStringSubmatch(r.node.Log()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("node did not log its debug address:\n%s", r.node.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nodeHeap reads the node's live heap after a GC, from its pprof listener.
func nodeHeap(tb testing.TB, r relayProc) int64 {
	tb.Helper()
	_, body := httpGet(tb, "http://"+debugAddr(tb, r)+"/debug/pprof/heap?gc=1&debug=1")
	m := heapAllocRE.FindStringSubmatch(body)
	if m == nil {
		tb.Fatal("no HeapAlloc in the heap profile")
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

func gridSide(n int) int {
	s := 1
	for s*s < n {
		s++
	}
	return s
}

// guards returns node flags with authentication off and every limit
// lifted, flags with authentication and the default limits on (at most
// maxConns connections from the load tool's one address), and a token for
// the load tool's clients.
func guards(b *testing.B, maxConns int) (off, on []string, token string) {
	secret := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	key, _ := hex.DecodeString(secret)
	token, err := auth.Issue(key, nil, []string{"load"}, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	off = []string{"--max-conns-per-ip", "-1", "--max-msgs-per-sec", "-1", "--max-records-per-sec", "-1",
		"--max-objects-per-owner", "-1", "--max-props-per-object", "-1", "--max-value-bytes", "-1", "--max-object-bytes", "-1"}
	on = []string{"--auth-key", secret, "--max-conns-per-ip", fmt.Sprint(maxConns)}
	return off, on, token
}

// benchTopo is a deployment under test: where changes enter, where they
// are watched, and the hops between.
type benchTopo struct {
	entry, mid, far *proc
	hops            int
}

// startTopo starts a single node ("node"), a server with a proxy chain of
// depth 2 ("chain", far = the last proxy) or a 3-member mesh ("mesh", far
// = the third member).
func startTopo(tb testing.TB, name string) benchTopo {
	tb.Helper()
	switch name {
	case "node":
		s := startProc(tb)
		return benchTopo{entry: s, mid: s, far: s}
	case "chain":
		s := startProc(tb)
		p1 := startProc(tb, "--role", "proxy", "--upstream", s.URL())
		p2 := startProc(tb, "--role", "proxy", "--upstream", p1.URL())
		waitUntil(tb, "the chain ready", 10*time.Second, func() bool { c, _ := httpGet(tb, "http://"+p2.Addr+"/readyz"); return c == 200 })
		return benchTopo{entry: s, mid: p1, far: p2, hops: 2}
	default:
		secret := strings.Repeat("ef", 32)
		common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "bench", "--mesh-profile", "local"}
		a := startProc(tb, common...)
		m2 := startProc(tb, append(common, "--join", meshAddr(tb, a))...)
		m3 := startProc(tb, append(common, "--join", meshAddr(tb, a))...)
		waitMesh(tb, []*proc{a, m2, m3})
		return benchTopo{entry: a, mid: m2, far: m3, hops: 1}
	}
}

// floodClient connects a raw client that answers the handshake and reads
// (and drops) whatever it is sent.
func floodClient(tb testing.TB, url, id string) *websocket.Conn { return rawClient(tb, url, id, nil) }

// rawClient connects a minimal client: it answers the handshake as id,
// passes every other message to seen (if not nil; on the reading
// goroutine) and returns once it has answered. It decodes nothing, so a
// benchmark's clients cost little beside the node they measure.
func rawClient(tb testing.TB, url, id string, seen func(msg []byte)) *websocket.Conn {
	tb.Helper()
	return rawClientWith(tb, url, id, "", seen)
}

// rawClientWith is rawClient with more metadata: extra is inserted in its
// JSON object (`,"features":["scopes"]`, say).
func rawClientWith(tb testing.TB, url, id, extra string, seen func(msg []byte)) *websocket.Conn {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetReadLimit(-1)
	tb.Cleanup(func() { c.CloseNow() })
	ready := make(chan struct{})
	go func() {
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			switch {
			case bytes.HasPrefix(b, []byte(`["requestMetadata"`)):
				c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `["metadataChange",{"identifier":%[1]q,"identifierChain":[%[1]q]%[2]s}]`, id, extra))
				close(ready)
			case seen != nil:
				seen(b)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		tb.Fatal("no handshake")
	}
	return c
}

// watchFor connects a minimal client (rawClient) and signals once a
// message mentions the object id.
func watchFor(tb testing.TB, url, id string) <-chan struct{} {
	tb.Helper()
	seen := make(chan struct{})
	key := []byte(`"id":"` + id + `"`)
	var once sync.Once
	rawClient(tb, url, fmt.Sprintf("watch-%08d-%08d", watchers.Add(1), os.Getpid()), func(b []byte) {
		if bytes.Contains(b, key) {
			once.Do(func() { close(seen) })
		}
	})
	return seen
}
