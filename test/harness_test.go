package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/client"
)

// The harness: node processes (startProc, proc), the binaries they run,
// HTTP reads of their endpoints and metrics, and waiting for a condition.
// Every test of this package shares these; a helper more than one test
// file needs belongs in a harness file.

type built struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*built{}
)

// binary builds ../cmd/<name> once per test run and returns its path.
func binary(tb testing.TB, name string) string {
	tb.Helper()
	buildsMu.Lock()
	b := builds[name]
	if b == nil {
		b = &built{}
		builds[name] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", b.path, "../cmd/"+name).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// nodeBinary builds solipsism-node once per test run.
func nodeBinary(tb testing.TB) string { return binary(tb, "solipsism-node") }

// proc is a running solipsism-node process.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	Addr string // host:port it serves on
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
	err  error
}

// The "serving" log line, in text and in JSON format.
var addrREs = []*regexp.Regexp{
	regexp.MustCompile(`msg=serving addr=(\S+)`),
	regexp.MustCompile(`"msg":"serving","addr":"([^"]+)"`),
}

// startProc starts the binary with args (plus --listen 127.0.0.1:0 unless
// given) and waits until it serves.
func startProc(t testing.TB, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

// startProcEnv is startProc with extra environment variables.
func startProcEnv(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, "", env, args...)
}

// startProcIn is startProcEnv in the working directory dir ("": this
// one's); there, a node not given --data-dir keeps its store in dir too,
// as it would for a user.
func startProcIn(t testing.TB, dir string, env []string, args ...string) *proc {
	t.Helper()
	hasListen, hasData := false, dir != ""
	for _, a := range args {
		hasListen = hasListen || strings.HasPrefix(a, "--listen")
		hasData = hasData || strings.HasPrefix(a, "--data-dir")
	}
	if !hasListen {
		args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	}
	if !hasData {
		// A store of its own, gone with the test.
		args = append([]string{"--data-dir", t.TempDir()}, args...)
	}
	cmd := exec.Command(nodeBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "SOLIPSISM_LOG_LEVEL=debug"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			for _, re := range addrREs {
				if m := re.FindStringSubmatch(line); m != nil {
					select {
					case addrc <- m[1]:
					default:
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("log of %v:\n%s", args, p.Log())
		}
	})
	select {
	case p.Addr = <-addrc:
	case <-p.done:
		t.Fatalf("solipsism-node %v exited: %v\n%s", args, p.err, p.Log())
	case <-time.After(20 * time.Second):
		t.Fatalf("solipsism-node %v did not start\n%s", args, p.Log())
	}
	return p
}

func (p *proc) URL() string { return "ws://" + p.Addr + "/ws" }

func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Kill stops the process with SIGKILL if it is still running.
func (p *proc) Kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Stop sends SIGTERM and waits for a clean exit.
func (p *proc) Stop(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.Log())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit within 15s of SIGTERM\n%s", p.Log())
	}
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	code, body, err := tryGet(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return code, body
}

// tryGet is httpGet for a node that may be too busy to answer in time (or
// restarting): the error is the caller's to judge.
func tryGet(url string) (int, string, error) { return tryGetWithin(url, 5*time.Second) }

// tryGetWithin is tryGet with a time limit for the whole answer: a world
// of 100,000 objects takes a busy node a while to write.
func tryGetWithin(url string, limit time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// runBinary runs bin with args (and, to start a node, a store in a
// directory of its own unless args name one) and returns its output.
func runBinary(bin string, args, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subcommand := len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "--version")
	if !subcommand && !strings.Contains(strings.Join(args, " "), "--data-dir") {
		dir, err := os.MkdirTemp("", "solipsism-data-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		args = append([]string{"--data-dir", dir}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stateOf returns a node process's /api/state.
func stateOf(t testing.TB, p *proc) api.State {
	t.Helper()
	_, body := httpGet(t, "http://"+p.Addr+"/api/state?limit=100000")
	var st api.State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/api/state: %v", err)
	}
	return st
}

func waitUntil(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dialNode(t testing.TB, ctx context.Context, url, prefix string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, url, client.Options{Prefix: prefix, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var meshAddrRE = regexp.MustCompile(`msg="mesh started" .*bind=(\S+)`)

// meshAddr waits for the node's memberlist address in its log.
func meshAddr(t testing.TB, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := meshAddrRE.FindStringSubmatch(p.Log()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no mesh address in log:\n%s", p.Log())
	return ""
}

type health struct {
	Identifier string `json:"identifier"`
	Mesh       struct {
		Joined  bool `json:"joined"`
		Members []struct {
			Linked bool `json:"linked"`
		} `json:"members"`
	} `json:"mesh"`
}

// waitMesh waits until every member of procs links to every other.
func waitMesh(t testing.TB, procs []*proc) {
	t.Helper()
	want := len(procs) * (len(procs) - 1)
	deadline := time.Now().Add(15 * time.Second)
	for {
		linked := 0
		for _, p := range procs {
			for _, m := range meshHealth(t, p).Mesh.Members {
				if m.Linked {
					linked++
				}
			}
		}
		if linked == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mesh did not form: %d of %d member links", linked, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func metricValue(text, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func readyz(t testing.TB, p *proc) (int, readiness) {
	t.Helper()
	code, body := httpGet(t, "http://"+p.Addr+"/readyz")
	var r readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz: %v: %s", err, body)
	}
	return code, r
}

// objectsOf returns the ids of a node process's objects, from its
// inspector API.
func objectsOf(t testing.TB, p *proc) map[string]bool {
	t.Helper()
	_, body := httpGet(t, "http://"+p.Addr+"/api/state")
	var st api.State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/api/state: %v", err)
	}
	out := map[string]bool{}
	for _, o := range st.Objects {
		out[o.ID] = true
	}
	return out
}

// waitMetric waits until the node's metric samples whose line starts
// with prefix sum to n.
func waitMetric(t *testing.T, r relayProc, prefix string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, m := httpGet(t, "http://"+r.addr+"/metrics")
		v := 0.0
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, prefix) {
				var x float64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &x)
				v += x
			}
		}
		if v == float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s…: %v, want %d", prefix, v, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshotAddr reads the UDP address a node serves snapshots on from its
// log.
func snapshotAddr(t *testing.T, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(p.Log(), "\n") {
			if strings.Contains(line, `msg="serving snapshots"`) {
				var addr string
				if _, err := fmt.Sscanf(line[strings.Index(line, "udp="):], "udp=%s", &addr); err == nil {
					return addr
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no snapshot address in the node's log")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func meshHealth(t testing.TB, p *proc) health {
	_, body := httpGet(t, "http://"+p.Addr+"/healthz")
	var h health
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("/healthz: %v: %s", err, body)
	}
	return h
}

// freeUDPAddr returns a loopback UDP address no one listens on now.
func freeUDPAddr(tb testing.TB) string {
	tb.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// localPort returns a 127.0.0.1 port free for both TCP and UDP, for a
// node that must come back on its address: memberlist binds both on its
// number, and a port free for TCP may be held for UDP (browsers' media,
// the snapshot tests), as TestSoak once met.
func localPort(t *testing.T) int {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no port free for both TCP and UDP on 127.0.0.1")
	return 0
}
