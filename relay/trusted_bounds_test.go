package relay_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestHostileUpstreamBounded: an upstream floods a proxy with distinct
// objects of many owners, more than the proxy's world bounds. The proxy
// keeps at most its bound (no per-owner quota applies to an upstream's
// worlds), counts and logs the refusals, and goes on serving its clients.
func TestHostileUpstreamBounded(t *testing.T) {
	// Each flooded object has 105 bytes of properties ("pad" and a string
	// of 100).
	for _, c := range []struct {
		name   string
		quotas relay.Quotas
		bound  int
	}{
		{"objects", relay.Quotas{WorldObjects: 2000}, 2000},
		{"bytes", relay.Quotas{WorldBytes: 105 * 1500}, 1500},
	} {
		t.Run(c.name, func(t *testing.T) { hostileUpstream(t, c.quotas, c.bound) })
	}
}

func hostileUpstream(t *testing.T, quotas relay.Quotas, bound int) {
	flooded := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		go func() { // read and ignore what the proxy says
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		c.Write(ctx, websocket.MessageText, []byte(`["metadataChange",{"identifier":"server-AAAAAAAA-AAAAAAAA","identifierChain":["server-AAAAAAAA-AAAAAAAA"]}]`))
		pad := strings.Repeat("x", 100)
		for batch := range 10 {
			var sb strings.Builder
			sb.WriteString(`["worldChange",{"timestamp":1700000000000,"changes":[`)
			for i := range 1000 {
				if i > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"type":"add","id":"f%d-%d","owner":"owner-%d-%d","properties":{"pad":"%s"}}`, batch, i, batch, i, pad)
			}
			sb.WriteString(`]}]`)
			if c.Write(ctx, websocket.MessageText, []byte(sb.String())) != nil {
				return
			}
		}
		close(flooded)
		<-ctx.Done()
	}))
	t.Cleanup(up.Close)
	var logs syncBuffer
	p, urlP := startProxy(t, wiretest.WSURL(up), relay.Options{Tick: 5 * time.Millisecond, Quotas: quotas,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	select {
	case <-flooded:
	case <-time.After(10 * time.Second):
		t.Fatal("the flood was not read")
	}
	waitFor(t, "the proxy to hold its bound", 10*time.Second, func() bool { return p.World().Len() == bound })
	time.Sleep(100 * time.Millisecond)
	if n := p.World().Len(); n != bound {
		t.Fatalf("the proxy holds %d objects, want its bound %d", n, bound)
	}
	// It goes on serving its own clients (whose objects are its own, not
	// the upstream's).
	a := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})
	b := wiretest.Dial(t, urlP, c2ID, wiretest.Options{})
	a.Change(wiretest.Add("obj-a", c1ID, props{"n": 1}))
	b.Wait("the proxy's world", 5*time.Second, func(m map[string]wiretest.Object) bool { return len(m) == bound+1 })
	if _, ok := b.Objects()["obj-a"]; !ok {
		t.Fatal("a client of the proxy lacks the other's object")
	}
	if !strings.Contains(logs.String(), "refusing objects from a trusted link") {
		t.Fatalf("no log line says what was refused:\n%s", logs.String())
	}
	a.CheckClean()
	b.CheckClean()
}
