package test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/bridge/snapshot"
)

type readiness struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
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

// TestBridgedPeersListed: an Alloverse client over WebSocket, one over
// ENet and a snapshot client each appear in /api/state and in
// solipsism_bridged_peers while connected, and disappear after; every kind
// is in the metrics at zero before anyone connects.
func TestBridgedPeersListed(t *testing.T) {
	pick := func() string {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().String()
	}
	enetAddr, snapAddr := pick(), pick()
	p := startProc(t, "--alloverse-enet", enetAddr, "--snapshot-listen", snapAddr)
	count := func(kind string) float64 {
		_, m := httpGet(t, "http://"+p.Addr+"/metrics")
		return metricValue(m, `solipsism_bridged_peers{kind="`+kind+`",role="server"}`)
	}
	listed := func() map[string]int {
		out := map[string]int{}
		for _, b := range stateOf(t, p).Bridged {
			out[b.Kind]++
		}
		return out
	}
	kinds := []string{"alloverse-websocket", "alloverse-enet", "snapshot"}
	_, m := httpGet(t, "http://"+p.Addr+"/metrics")
	for _, k := range kinds {
		if !strings.Contains(m, `solipsism_bridged_peers{kind="`+k+`"`) {
			t.Fatalf("no solipsism_bridged_peers for %s before anyone connects", k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := alloverse.DialClient(ctx, "ws://"+p.Addr+"/alloverse", alloverse.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	en, err := alloverse.DialENetClient(ctx, enetAddr, alloverse.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snapshot.Dial(ctx, snapAddr, snapshot.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "all three listed", 5*time.Second, func() bool {
		l := listed()
		return l["alloverse-websocket"] == 1 && l["alloverse-enet"] == 1 && l["snapshot"] == 1
	})
	for _, k := range kinds {
		if c := count(k); c != 1 {
			t.Fatalf("solipsism_bridged_peers{kind=%q} = %v while connected, want 1", k, c)
		}
	}
	ws.Close()
	en.Close()
	sc.Close()
	waitUntil(t, "all three gone", 10*time.Second, func() bool { return len(listed()) == 0 })
	for _, k := range kinds {
		if c := count(k); c != 0 {
			t.Fatalf("solipsism_bridged_peers{kind=%q} = %v after they left, want 0", k, c)
		}
	}
}
