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

// TestTypeDeclarations compiles an app written against the client's
// TypeScript declarations (web/solipsism.d.ts) with tsc --noEmit, as the
// package is imported by name (its exports map). The compiler comes from
// web/node_modules (npm ci in web/; .ci/run does it).
func TestTypeDeclarations(t *testing.T) {
	tsc := "../web/node_modules/.bin/tsc"
	if _, err := os.Stat(tsc); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tsc not found: run npm ci in web/")
		}
		t.Skip("the declaration check needs TypeScript: run npm ci in web/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, tsc, "--noEmit", "-p", "../web/test/types").CombinedOutput()
	if err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}
