package test

import (
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// A server process and a proxy process, clients on both.
func TestProxyProcess(t *testing.T) {
	server := startProc(t, "--tick", "20ms")
	proxy := startProc(t, "--role", "proxy", "--upstream", server.URL(), "--tick", "20ms", "--backoff-max", "500ms")
	if _, body := httpGet(t, "http://"+proxy.Addr+"/healthz"); !strings.Contains(body, `"role":"proxy"`) {
		t.Fatalf("proxy /healthz: %s", body)
	}
	onServer := wiretest.Dial(t, server.URL(), "client-SSSSSSSS-SSSSSSSS", wiretest.Options{})
	onProxy := wiretest.Dial(t, proxy.URL(), "client-PPPPPPPP-PPPPPPPP", wiretest.Options{})
	other := wiretest.Dial(t, proxy.URL(), "client-QQQQQQQQ-QQQQQQQQ", wiretest.Options{DocDialect: true})

	onServer.Change(wiretest.Add("s", onServer.ID, props{"v": 1}))
	onProxy.Change(wiretest.Add("p", onProxy.ID, props{"v": 1}))
	other.WaitProp("s", "v", "1")
	other.WaitProp("p", "v", "1")
	onServer.WaitProp("p", "v", "1")
	onProxy.WaitProp("s", "v", "1")

	onProxy.Change(wiretest.Update("p", onProxy.ID, props{"v": 2}))
	onServer.WaitProp("p", "v", "2")
	onServer.Change(wiretest.Update("s", onServer.ID, props{"v": 2}))
	onProxy.WaitProp("s", "v", "2")

	// The proxy's metrics show its upstream link.
	_, m := httpGet(t, "http://"+proxy.Addr+"/metrics")
	if !strings.Contains(m, `solipsism_links{kind="upstream",role="proxy"} 1`) {
		t.Errorf("proxy metrics lack its upstream link")
	}

	// A proxy client leaving is cleaned up at the server; the whole proxy
	// stopping takes its other client's objects with it.
	onProxy.Close()
	onServer.WaitGone("p")
	other.Change(wiretest.Add("q", other.ID, props{}))
	onServer.WaitHas("q")
	proxy.Stop(t)
	onServer.WaitGone("q")
	time.Sleep(50 * time.Millisecond)
	if len(onServer.Objects()) != 0 {
		t.Fatalf("server client still sees %v", onServer.Objects())
	}
	for _, p := range []*wiretest.Peer{onServer, other} {
		p.CheckClean()
	}
}
