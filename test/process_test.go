package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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
