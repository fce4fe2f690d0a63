package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// TestUpstreamRefusesOneWorld: a proxy's upstream token grants "proxy" and
// "client" identifiers; a client whose own token (at a proxy checking
// tokens of its own, or at one checking none) grants a "bot" identifier
// connects to the proxy. The upstream refuses that world alone and says
// so; the proxy closes that client with 4005. The proxy's upstream link
// stays up, and a legitimate client's object behind the proxy never
// disappears for the server's clients.
func TestUpstreamRefusesOneWorld(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	hs, _ := auth.NewHS256(secret)
	issue := func(prefixes ...string) string {
		tok, err := auth.Issue(secret, nil, prefixes, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, proxyAuth := range []bool{true, false} {
		name := "proxy checks tokens"
		if !proxyAuth {
			name = "proxy checks none"
		}
		t.Run(name, func(t *testing.T) {
			_, urlS := startNode(t, relay.Options{Tick: 5 * time.Millisecond, Auth: hs, Registerer: nil})
			popts := relay.Options{Tick: 5 * time.Millisecond, Identifier: p1ID, Role: ownership.Proxy}
			if proxyAuth {
				popts.Auth = hs
			}
			p, urlP := startNode(t, popts)
			ctx, cancel := context.WithCancel(context.Background())
			connects := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				p.RunUpstream(ctx, relay.UpstreamOptions{URL: urlS, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
					Dial:      peer.DialOptions{Header: http.Header{"Authorization": {"Bearer " + issue("proxy", "client")}}},
					OnConnect: func() { connects++ }})
			}()
			t.Cleanup(func() { cancel(); <-done })
			watcher := wiretest.Dial(t, urlS+"?token="+issue("client"), c0ID, wiretest.Options{})
			good := wiretest.Dial(t, urlP+"?token="+issue("client"), c1ID, wiretest.Options{})
			good.Change(wiretest.Add("obj-good", c1ID, props{"n": 1}))
			watcher.WaitHas("obj-good")
			waitFor(t, "the proxy ready", 5*time.Second, func() bool { ok, _ := p.Readiness(); return ok })

			// The watcher records whether the good object ever goes.
			stop := make(chan struct{})
			vanished := make(chan bool, 1)
			go func() {
				for {
					select {
					case <-stop:
						vanished <- false
						return
					default:
					}
					if _, ok := watcher.Objects()["obj-good"]; !ok {
						vanished <- true
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			for i := range 3 {
				botID := fmt.Sprintf("bot-AAAAAAAA-BBBBBBB%d", i)
				bot := wiretest.Dial(t, urlP+"?token="+issue("bot"), botID, wiretest.Options{})
				// (The refusal may close it before this goes out.)
				bot.TryChange(wiretest.Add(fmt.Sprint("obj-bot", i), botID, props{"n": 2})) //nolint:errcheck
				if code, reason := bot.WaitClosed(5 * time.Second); code != websocket.StatusCode(peer.StatusUnauthorized) {
					t.Fatalf("the bot behind the proxy was closed with %d %q, want 4005", code, reason)
				}
			}
			good.Change(wiretest.Update("obj-good", c1ID, props{"n": 3}))
			watcher.WaitProp("obj-good", "n", "3")
			close(stop)
			if <-vanished {
				t.Fatal("the legitimate client's object vanished for the server's clients")
			}
			for id := range watcher.Objects() {
				if strings.HasPrefix(id, "obj-bot") {
					t.Fatal("a refused world's object reached the server")
				}
			}
			if connects != 1 {
				t.Fatalf("the proxy connected to its upstream %d times, want once", connects)
			}
			if ok, reasons := p.Readiness(); !ok {
				t.Fatalf("the proxy is not ready: %v", reasons)
			}
			watcher.CheckClean()
			good.CheckClean()
		})
	}
}
