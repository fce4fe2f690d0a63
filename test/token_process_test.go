package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"
)

// TestTokenCommand: "solipsism-node token" prints a token that a node
// started with the same --auth-key accepts; one signed with another key,
// or granting another prefix, is refused. "--version" names the build,
// and /metrics carries solipsism_build_info.
func TestTokenCommand(t *testing.T) {
	bin := nodeBinary(t)
	key := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	p := startProc(t, "--auth-key", key)
	mint := func(k string, args ...string) string {
		t.Helper()
		out, err := runBinary(bin, append([]string{"token", "--key", k}, args...), nil)
		if err != nil {
			t.Fatalf("token: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(token string) error {
		dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
		defer dcancel()
		c, err := relay.Dial(dctx, p.URL(), relay.ClientOptions{Prefix: "bot", Token: token})
		if err == nil {
			err = c.WaitConnected(dctx)
			c.Close()
		}
		return err
	}
	if err := dial(mint(key, "--prefix", "bot", "--ttl", "10m")); err != nil {
		t.Fatalf("a token from the node's key: %v", err)
	}
	if err := dial(mint(other, "--prefix", "bot")); err == nil {
		t.Fatal("a token signed with another key was accepted")
	}
	if out, err := runBinary(bin, []string{"token", "--key", "short", "--prefix", "bot"}, nil); err == nil || !strings.Contains(out, "--key") {
		t.Fatalf("a bad key: %v\n%s", err, out)
	}
	if out, err := runBinary(bin, []string{"token", "--key", key}, nil); err == nil || !strings.Contains(out, "grant something") {
		t.Fatalf("a token granting nothing: %v\n%s", err, out)
	}
	out, err := runBinary(bin, []string{"--version"}, nil)
	if err != nil || !strings.HasPrefix(out, "solipsism-node ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %v: %q", err, out)
	}
	if _, m := httpGet(t, "http://"+p.Addr+"/metrics"); !strings.Contains(m, "solipsism_build_info{") {
		t.Fatal("/metrics has no solipsism_build_info")
	}
}
