package test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

type readiness struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
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

// TestProxyReadiness: a proxy whose upstream is down serves (/healthz 200)
// but is not ready (/readyz 503, with the cause), and says so once at
// WARN, not once per attempt; within a second of the upstream coming back
// it is ready, and says that too.
func TestProxyReadiness(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upAddr := ln.Addr().String()
	ln.Close()
	proxy := startProc(t, "--role", "proxy", "--upstream", "ws://"+upAddr+"/ws", "--backoff-min", "20ms", "--backoff-max", "200ms")
	if code, _ := httpGet(t, "http://"+proxy.Addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d while the upstream is down, want 200 (the process serves)", code)
	}
	waitUntil(t, "a few failed attempts", 5*time.Second, func() bool { return strings.Count(proxy.Log(), "upstream dial failed") >= 3 })
	code, r := readyz(t, proxy)
	if code != 503 || r.Ready || len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "upstream not connected") || !strings.Contains(r.Reasons[0], "refused") {
		t.Fatalf("/readyz with the upstream down: %d %+v", code, r)
	}
	if n := strings.Count(proxy.Log(), "upstream unreachable"); n != 1 || !strings.Contains(proxy.Log(), "level=WARN msg=\"upstream unreachable") {
		t.Fatalf("%d WARN lines for one outage:\n%s", n, proxy.Log())
	}
	server := startProc(t, "--listen", upAddr)
	back := time.Now()
	waitUntil(t, "the proxy ready", 5*time.Second, func() bool { c, _ := readyz(t, proxy); return c == 200 })
	if d := time.Since(back); d > 1500*time.Millisecond {
		t.Errorf("ready %s after the upstream came back, want within about a second", d)
	}
	if !strings.Contains(proxy.Log(), "upstream reachable again") {
		t.Fatal("no note that the upstream is back")
	}
	if code, r := readyz(t, server); code != 200 || !r.Ready {
		t.Fatalf("the server's /readyz: %d %+v", code, r)
	}
}
