package test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestJavaScriptClient runs web/test with Node.js's built-in test runner
// against real solipsism-node processes.
func TestJavaScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node not found: the JavaScript client tests need Node.js 20 or newer")
		}
		t.Skip("the JavaScript client tests need Node.js 20 or newer (apt-get install -y nodejs)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--experimental-websocket", "--test", "--test-reporter=spec", "../web/test/solipsism.test.js")
	cmd.Env = append(os.Environ(), "SOLIPSISM_NODE_BIN="+nodeBinary(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}
