package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
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
		c, err := client.Dial(dctx, p.URL(), client.Options{Prefix: "bot", Token: token})
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
	admin := mint(key, "--admin", "--ttl", "10m")
	if _, m := httpGet(t, "http://"+p.Addr+"/metrics?token="+admin); !strings.Contains(m, "solipsism_build_info{") {
		t.Fatal("/metrics has no solipsism_build_info")
	}
}

// TestAdminEndpoints: with authentication on, the endpoints that show the
// world's objects, owners and clients' addresses refuse requests without
// a token (401), with an invalid one (401) and with one lacking the admin
// claim (403), and serve a token with it, as a query parameter or a
// bearer header. The demo, the client library and /healthz stay open.
func TestAdminEndpoints(t *testing.T) {
	bin := nodeBinary(t)
	key := strings.Repeat("5a", 32)
	p := startProc(t, "--auth-key", key, "--debug-listen", "127.0.0.1:0")
	mint := func(args ...string) string {
		t.Helper()
		out, err := runBinary(bin, append([]string{"token", "--key", key}, args...), nil)
		if err != nil {
			t.Fatalf("token: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	admin, user := mint("--admin"), mint("--prefix", "client")
	forged, _ := runBinary(bin, []string{"token", "--key", strings.Repeat("77", 32), "--admin"}, nil)
	debug := debugAddrOf(t, p)
	get := func(url, token, header string) int {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			if header != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			} else {
				q := req.URL.Query()
				q.Set("token", token)
				req.URL.RawQuery = q.Encode()
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	base := "http://" + p.Addr
	for _, path := range []string{base + "/api/state", base + "/api/alloverse", base + "/inspect", base + "/metrics", "http://" + debug + "/debug/pprof/"} {
		t.Run(path, func(t *testing.T) {
			for _, c := range []struct {
				name, token, header string
				want                int
			}{
				{"no token", "", "", 401},
				{"forged", strings.TrimSpace(forged), "", 401},
				{"not an admin", user, "", 403},
				{"admin, query", admin, "", 200},
				{"admin, header", admin, "bearer", 200},
			} {
				if got := get(path, c.token, c.header); got != c.want {
					t.Errorf("%s: %d, want %d", c.name, got, c.want)
				}
			}
		})
	}
	// Publishing messages as the node is an admin's.
	for _, c := range []struct {
		name, token string
		want        int
	}{{"no token", "", 401}, {"not an admin", user, 403}, {"admin", admin, 202}} {
		req, _ := http.NewRequest("POST", base+"/api/messages", strings.NewReader(`{"type":"notice","data":"restart at noon"}`))
		req.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST /api/messages, %s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	for _, path := range []string{"/", "/solipsism.js", "/healthz", "/readyz"} {
		if got := get(base+path, "", ""); got != 200 {
			t.Errorf("%s without a token: %d, want 200", path, got)
		}
	}
	// The key never leaves the node: not in the profiles' command line, not
	// in the log (which warns that it was on the command line).
	_, cmdline := httpGet(t, "http://"+debug+"/debug/pprof/cmdline?token="+admin)
	if strings.Contains(cmdline, key) || !strings.Contains(cmdline, "--auth-key\x00<redacted>") {
		t.Errorf("/debug/pprof/cmdline shows %q", cmdline)
	}
	for _, path := range []string{"/api/state", "/metrics"} {
		if _, body := httpGet(t, base+path+"?token="+admin); strings.Contains(body, key) {
			t.Errorf("%s shows the key", path)
		}
	}
	if log := p.Log(); strings.Contains(log, key) || !strings.Contains(log, "secrets on the command line are visible") {
		t.Errorf("the log shows the key, or does not warn that it is on the command line:\n%s", log)
	}
	// From a file, the same key: the same tokens work, and no warning.
	file := filepath.Join(t.TempDir(), "auth.key")
	os.WriteFile(file, []byte(key+"\n"), 0o600)
	pf := startProc(t, "--auth-key-file", file)
	if got := get("http://"+pf.Addr+"/api/state", admin, ""); got != 200 {
		t.Errorf("an admin token on a node with --auth-key-file: %d, want 200", got)
	}
	if got := get("http://"+pf.Addr+"/api/state", "", ""); got != 401 {
		t.Errorf("no token on a node with --auth-key-file: %d, want 401", got)
	}
	if strings.Contains(pf.Log(), "secrets on the command line") {
		t.Error("a key from a file is warned about")
	}
}

// debugAddrOf reads the address of a node process's --debug-listen from
// its log.
func debugAddrOf(t testing.TB, p *proc) string {
	t.Helper()
	re := regexp.MustCompile(`msg="serving debug endpoints" addr=(\S+)`)
	var m []string
	waitUntil(t, "the debug listener", 5*time.Second, func() bool { m = re.FindStringSubmatch(p.Log()); return m != nil })
	return m[1]
}
