package test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineProc is a program that reports on stdout, a line per event, and
// may take commands on stdin, as the Godot and C# test programs do.
type lineProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error
	mu    sync.Mutex
	out   strings.Builder // everything it printed, for failures
}

// startLineProc starts name with args and env added to this process's; it
// is killed, if still running, when the test ends (or after 2 minutes).
func startLineProc(t testing.TB, env []string, name string, args ...string) *lineProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	p := &lineProc{cmd: cmd, stdin: stdin, lines: make(chan string, 4096), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		cancel()
		<-p.done
	})
	return p
}

// printed returns everything the program printed so far.
func (p *lineProc) printed() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// expect returns the rest of the first line that starts with prefix,
// failing after timeout, if the program exits first, or if it reports a
// failure (a line starting FAIL or TIMEOUT, or a script error).
func (p *lineProc) expect(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s exited before %q; it printed:\n%s", p.cmd.Path, prefix, p.printed())
			}
			if strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "TIMEOUT") || strings.Contains(l, "SCRIPT ERROR") {
				t.Fatalf("%s: %s; it printed:\n%s", p.cmd.Path, l, p.printed())
			}
			if strings.HasPrefix(l, prefix) {
				return strings.TrimSpace(strings.TrimPrefix(l, prefix))
			}
		case <-deadline:
			t.Fatalf("no %q from %s in %s; it printed:\n%s", prefix, p.cmd.Path, timeout, p.printed())
		}
	}
}

// send writes a command line to the program.
func (p *lineProc) send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// startGodot runs a script of clients/godot headless against a node.
func startGodot(t testing.TB, script string, env ...string) *lineProc {
	t.Helper()
	return startLineProc(t, env, godotPath(t), "--path", "../clients/godot", "-s", script)
}

// expectExit waits for the process to exit by itself, with status 0.
func (p *lineProc) expectExit(t testing.TB) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // (for the cleanup)
		if err != nil {
			t.Fatalf("%v\n%s", err, p.printed())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit within 10 s:\n%s", p.printed())
	}
}
