package test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docExample is a shell block of the docs that starts several nodes.
type docExample struct {
	file  string
	nodes []string // the command lines, as written
}

// multiNodeExamples returns the fenced shell blocks of the README and the
// docs that start more than one node with go run.
func multiNodeExamples(t *testing.T) []docExample {
	t.Helper()
	var out []docExample
	for _, f := range []string{"../README.md", "../docs/operations.md", "../docs/security.md", "../docs/bridges.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range strings.Split(string(b), "```") {
			if i%2 == 0 || !strings.HasPrefix(block, "sh") {
				continue // prose, or a block of another language
			}
			var nodes []string
			for _, line := range strings.Split(block, "\n") {
				if strings.HasPrefix(line, "go run ./cmd/solipsism-node --") {
					nodes = append(nodes, line)
				}
			}
			if len(nodes) > 1 {
				out = append(out, docExample{file: f, nodes: nodes})
			}
		}
	}
	return out
}

var (
	portRE    = regexp.MustCompile(`(^|[ =:/])(localhost|127\.0\.0\.1)?:(\d{4,5})\b`)
	commentRE = regexp.MustCompile(`\s+#.*$`)
)

// TestDocsMultiNodeExamples runs every example of the README and the docs
// that starts several nodes, as written, from one directory: each node
// starts and keeps running (none finds its store in use by another).
// Only the addresses change: each port becomes a free one on 127.0.0.1.
func TestDocsMultiNodeExamples(t *testing.T) {
	examples := multiNodeExamples(t)
	if len(examples) < 3 {
		t.Fatalf("found %d multi-node examples in the docs, want the README's proxy and mesh ones at least", len(examples))
	}
	for i, ex := range examples {
		t.Run(fmt.Sprintf("%d %s", i+1, strings.TrimPrefix(ex.file, "../")), func(t *testing.T) {
			dir := t.TempDir()
			ports := map[string]int{}
			var procs []*proc
			for _, line := range ex.nodes {
				line = strings.TrimSuffix(strings.TrimSpace(commentRE.ReplaceAllString(line, "")), " &")
				line = strings.ReplaceAll(line, "$SECRET", strings.Repeat("ab", 32))
				line = portRE.ReplaceAllStringFunc(line, func(m string) string {
					sub := portRE.FindStringSubmatch(m)
					p, ok := ports[sub[3]]
					if !ok {
						p = freePort(t)
						ports[sub[3]] = p
					}
					return fmt.Sprintf("%s127.0.0.1:%d", sub[1], p)
				})
				args := strings.Fields(strings.TrimPrefix(line, "go run ./cmd/solipsism-node"))
				procs = append(procs, startProcIn(t, dir, nil, args...))
			}
			time.Sleep(time.Second)
			for i, p := range procs {
				select {
				case <-p.done:
					t.Fatalf("node %d (%s) exited: %v\n%s", i+1, ex.nodes[i], p.err, p.Log())
				default:
				}
			}
		})
	}
}

// freePort returns a free 127.0.0.1 port (TCP; memberlist takes UDP on
// the same number too).
func freePort(t *testing.T) int { return localPort(t) }
