package main

import (
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

func TestParseConfig(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	emptyFile := filepath.Join(dir, "empty")
	os.WriteFile(emptyFile, nil, 0o600)
	tests := []struct {
		name    string
		args    []string
		env     func(string) (string, bool)
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{"defaults", nil, env(), func(t *testing.T, c config) {
			if c.listen != ":8080" || c.role != ownership.Server || c.tick != peer.DefaultTick || c.readLimit != 1<<20 || c.nodeTick() != peer.DefaultTick {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"default store", nil, env(), func(t *testing.T, c config) {
			if c.dataDir != "solipsism-data" {
				t.Fatalf("data dir %q", c.dataDir)
			}
		}, ""},
		{"an empty variable is the flag given empty", nil, env("SOLIPSISM_DATA_DIR", ""), func(t *testing.T, c config) {
			if c.dataDir != "" {
				t.Fatalf("SOLIPSISM_DATA_DIR= gave data dir %q, want none (as --data-dir \"\")", c.dataDir)
			}
		}, ""},
		{"tick 0 is immediate", []string{"--tick", "0"}, env(), func(t *testing.T, c config) {
			if c.nodeTick() != peer.Immediate {
				t.Fatal(c.nodeTick())
			}
		}, ""},
		{"env fills what flags leave", []string{"--tick", "10ms"}, env("SOLIPSISM_TICK", "99ms", "SOLIPSISM_READ_LIMIT", "64KiB", "SOLIPSISM_ORIGIN", "a.example, b.example"), func(t *testing.T, c config) {
			if c.tick != 10*time.Millisecond || c.readLimit != 64<<10 || len(c.origins) != 2 || c.origins[1] != "b.example" {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"limits and grace", []string{"--read-rate", "4MiB", "--reclaim-grace", "0"}, env("SOLIPSISM_READ_LIMIT", "2MiB"), func(t *testing.T, c config) {
			if c.readRate != 4<<20 || c.readLimit != 2<<20 || c.nodeGrace() >= 0 {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"default grace", nil, env(), func(t *testing.T, c config) {
			if c.nodeGrace() != relay.DefaultReclaimGrace {
				t.Fatal(c.nodeGrace())
			}
		}, ""},
		{"read limit too large", []string{"--read-limit", "3GiB"}, env(), nil, "--read-limit: want a positive size of at most"},
		{"negative grace", []string{"--reclaim-grace", "-1s"}, env(), nil, "--reclaim-grace"},
		{"proxy", []string{"--role", "proxy", "--upstream", "wss://example.org/ws"}, env(), func(t *testing.T, c config) {
			if c.role != ownership.Proxy || c.upstream != "wss://example.org/ws" {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"mesh", []string{"--mesh-bind", "127.0.0.1:7946", "--join", "a:1,b:2", "--mesh-secret", strings.Repeat("ab", 32)}, env(), func(t *testing.T, c config) {
			if len(c.join) != 2 || len(c.meshSecret) != 32 {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"client role refused", []string{"--role", "client"}, env(), nil, "--role"},
		{"proxy without upstream", []string{"--role", "proxy"}, env(), nil, "--upstream"},
		{"token URL without a key", []string{"--token-url", "/token"}, env(), nil, "--token-url is for a node that requires tokens"},
		{"token URL with a key file", []string{"--token-url", "https://login.example/token", "--auth-key-file", keyFile}, env(), func(t *testing.T, c config) {
			if c.tokenURL == "" || c.authKey == "" {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"upstream for a server", []string{"--upstream", "ws://x/ws"}, env(), nil, "--upstream is for --role proxy"},
		{"http upstream", []string{"--role", "proxy", "--upstream", "http://x/ws"}, env(), nil, "ws:// or wss://"},
		{"join without mesh-bind", []string{"--join", "a:1"}, env(), nil, "--mesh-bind"},
		{"mesh for a proxy", []string{"--role", "proxy", "--upstream", "ws://x/ws", "--mesh-bind", "127.0.0.1:0"}, env(), nil, "--mesh-bind is for"},
		{"short secret", []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", "abcd"}, env(), nil, "32-byte key"},
		{"bad profile", []string{"--mesh-bind", "127.0.0.1:0", "--mesh-profile", "moon"}, env(), nil, "--mesh-profile"},
		{"bad env value", nil, env("SOLIPSISM_TICK", "soon"), nil, "SOLIPSISM_TICK"},
		{"negative tick", []string{"--tick", "-1s"}, env(), nil, "--tick"},
		{"bad level", []string{"--log-level", "loud"}, env(), nil, "--log-level"},
		{"stray argument", []string{"extra"}, env(), nil, "unexpected arguments"},
		{"secrets from files", []string{"--auth-key-file", keyFile, "--mesh-bind", "127.0.0.1:0", "--mesh-secret-file", keyFile,
			"--role", "server"}, env("SOLIPSISM_UPSTREAM_TOKEN_FILE", keyFile), func(t *testing.T, c config) {
			if c.authKey != strings.Repeat("ab", 32) || len(c.meshSecret) != 32 || c.upstreamToken != strings.Repeat("ab", 32) || len(c.secretsOnCommandLine) != 0 {
				t.Fatalf("%+v", c)
			}
		}, ""},
		{"secret on the command line", []string{"--auth-key=" + strings.Repeat("ab", 32)}, env(), func(t *testing.T, c config) {
			if len(c.secretsOnCommandLine) != 1 || c.secretsOnCommandLine[0] != "--auth-key" {
				t.Fatalf("%+v", c.secretsOnCommandLine)
			}
		}, ""},
		{"secret and its file", []string{"--auth-key", "x", "--auth-key-file", keyFile}, env(), nil, "give one of them"},
		{"missing secret file", []string{"--auth-key-file", filepath.Join(dir, "nope")}, env(), nil, "--auth-key-file"},
		{"empty secret file", []string{"--auth-key-file", emptyFile}, env(), nil, "is empty"},
		{"a bad secret in the environment is not printed", []string{"--mesh-bind", "127.0.0.1:0"}, env("SOLIPSISM_MESH_SECRET", "hunter2-secret"), nil, "--mesh-secret"},
		{"backoff order", []string{"--backoff-min", "2s", "--backoff-max", "1s"}, env(), nil, "--backoff-min"},
		{"ice servers", []string{"--ice-servers", `[{"urls":"stun:stun.example.org:3478"},{"urls":["turn:t.example.org"],"username":"u","credential":"p"}]`}, env(), func(t *testing.T, c config) {
			if len(c.iceServers) != 2 || c.iceServers[0].URLs[0] != "stun:stun.example.org:3478" || c.iceServers[1].Username != "u" {
				t.Fatalf("%+v", c.iceServers)
			}
		}, ""},
		{"ice servers not JSON", []string{"--ice-servers", "stun:x"}, env(), nil, "--ice-servers"},
		{"an ice server that is not one", []string{"--ice-servers", `[{"urls":"http://x"}]`}, env(), nil, "not a stun:"},
		{"schemas", []string{"--schemas", "../../docs/demo-schemas.json"}, env(), func(t *testing.T, c config) {
			if c.schemas == nil || len(c.schemas.Kinds()) != 4 {
				t.Fatalf("schemas: %+v", c.schemas)
			}
		}, ""},
		{"schemas missing", []string{"--schemas", filepath.Join(dir, "nope.json")}, env(), nil, "--schemas"},
		{"crowds", []string{"--priority-near", "12", "--max-client-bytes", "64KiB"}, env("SOLIPSISM_PRIORITY_BANDS", "5"), func(t *testing.T, c config) {
			if c.priority != (relay.PriorityOptions{Near: 12, Bands: 5, MaxBytesPerSecond: 64 << 10}) {
				t.Fatalf("%+v", c.priority)
			}
		}, ""},
		{"no priority by default", nil, env(), func(t *testing.T, c config) {
			if c.priority.Near != 0 || c.priority.MaxBytesPerSecond != 0 {
				t.Fatalf("%+v", c.priority)
			}
		}, ""},
		{"bad client bytes", []string{"--max-client-bytes", "lots"}, env(), nil, "--max-client-bytes"},
		{"bad bands", []string{"--priority-bands", "0"}, env(), nil, "--priority-bands"},
		{"alloverse views", nil, env("SOLIPSISM_ALLO_VIEW_RADIUS", "25"), func(t *testing.T, c config) {
			if c.alloView != 25 {
				t.Fatalf("view radius %v", c.alloView)
			}
		}, ""},
		{"bad view radius", []string{"--allo-view-radius", "-1"}, env(), nil, "--allo-view-radius"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.env, io.Discard)
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the secret: %v", err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestRedactArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"node --auth-key SECRET --tick 1s", "node --auth-key <redacted> --tick 1s"},
		{"node -auth-key=SECRET --mesh-secret=S2", "node -auth-key=<redacted> --mesh-secret=<redacted>"},
		{"node --upstream-token T --auth-key-file /k", "node --upstream-token <redacted> --auth-key-file /k"},
		{"node --listen :8080", "node --listen :8080"},
	} {
		if got := strings.Join(redactArgs(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("redactArgs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMeshAdvertise(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	emptyFile := filepath.Join(dir, "empty")
	os.WriteFile(emptyFile, nil, 0o600)
	tests := []struct {
		listen, bind, adv, want string
		err                     bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:7946", "", "ws://127.0.0.1:8080/ws", false},
		{"[::]:8080", "10.1.2.3:7946", "", "ws://10.1.2.3:8080/ws", false},
		{"[::]:8080", "0.0.0.0:7946", "", "", true},
		{"[::]:8080", "0.0.0.0:7946", "wss://node.example/ws", "wss://node.example/ws", false},
	}
	for _, tt := range tests {
		c := config{meshBind: tt.bind, advertiseURL: tt.adv}
		got, err := c.meshAdvertise(tt.listen)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("meshAdvertise(%q, bind %q) = %q, %v", tt.listen, tt.bind, got, err)
		}
	}
}

func FuzzParseSizeAndKey(f *testing.F) {
	for _, s := range []string{"1MiB", "64KiB", "1048576", "0", "-5", "1 GiB", strings.Repeat("ab", 32), "q83vEjRWeJq8nq8SNFZ4mrzerxI0VniavN6vEjRWeJo="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseSize(s, math.MaxInt64); err == nil && n <= 0 {
			t.Fatalf("parseSize(%q) = %d without error", s, n)
		}
		if k, err := parseKey(s); err == nil && !validKeyLen(len(k)) {
			t.Fatalf("parseKey(%q) gave %d bytes", s, len(k))
		}
	})
}

func TestInterestFlag(t *testing.T) {
	for _, c := range []struct {
		args    []string
		env     string
		boxes   int
		wantErr bool
	}{
		{args: []string{"--role", "proxy", "--upstream", "ws://127.0.0.1:1/ws", "--interest", "0,0,0,10,10,10", "--interest", "-5,-1,-5,5,1,5"}, boxes: 2},
		{args: []string{"--role", "proxy", "--upstream", "ws://127.0.0.1:1/ws"}, env: "0,0,0,1,1,1;2,2,2,3,3,3", boxes: 2},
		{args: []string{"--role", "proxy", "--interest", "0,0,0,10,10"}, wantErr: true},
		{args: []string{"--role", "proxy", "--interest", "5,0,0,1,1,1"}, wantErr: true},
		{args: []string{"--interest", "0,0,0,1,1,1"}, wantErr: true},
	} {
		t.Run(strings.Join(c.args, " ")+c.env, func(t *testing.T) {
			env := func(k string) (string, bool) {
				if k == "SOLIPSISM_INTEREST" && c.env != "" {
					return c.env, true
				}
				return "", false
			}
			cfg, err := parseConfig(c.args, env, io.Discard)
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v", err)
			}
			if err == nil && len(cfg.interest) != c.boxes {
				t.Fatalf("%d boxes", len(cfg.interest))
			}
		})
	}
}

// TestUsageGroups: every flag is in one group of -h, once.
func TestUsageGroups(t *testing.T) {
	var out strings.Builder
	if _, err := parseConfig([]string{"-h"}, func(string) (string, bool) { return "", false }, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if strings.Contains(out.String(), "\nOther:") {
		t.Fatalf("flags without a group:\n%s", out.String()[strings.Index(out.String(), "\nOther:"):])
	}
	count := map[string]int{}
	for _, g := range flagGroups {
		for _, f := range g.flags {
			count[f]++
		}
	}
	for f, n := range count {
		if n != 1 {
			t.Errorf("--%s is in %d groups", f, n)
		}
		if !strings.Contains(out.String(), "  --"+f+" ") && !strings.Contains(out.String(), "  --"+f+"\n") {
			t.Errorf("--%s is not in -h", f)
		}
	}
}
