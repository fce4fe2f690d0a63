package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/antientropy"
	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// TestScopeGapAsksAtOnce: an upstream sends a proxy a scope delta built on
// a version the proxy never got (a gap). The proxy refuses it, as the
// protocol says, and asks the upstream for that object at once (a
// requestRepair of its bucket) rather than at the next digest, an hour
// away here; the answer's snapshot brings its copy level.
func TestScopeGapAsksAtOnce(t *testing.T) {
	const server = "server-AAAAAAAA-AAAAAAAA"
	asked := make(chan []any, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		send := func(s string) {
			if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
				t.Log(err)
			}
		}
		send(`["metadataChange",{"identifier":"` + server + `","identifierChain":["` + server + `"],"role":"server","features":["ownership","digest","scopes"]}]`)
		send(`["worldChange",{"timestamp":1700000000000,"changes":[{"type":"add","id":"grid-1","owner":"` + server + `","properties":{"position":[0,0,0]},"scopes":{"blocks":{"ver":1,"added":{"a":{"c":1}},"full":true}}}]}]`)
		// Version 2 never comes: 3 is built on it.
		send(`["worldChange",{"timestamp":1700000000001,"changes":[{"type":"update","id":"grid-1","scopes":{"blocks":{"ver":3,"base":2,"modified":{"b":{"c":2}}}}}]}]`)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var m []any
			if json.Unmarshal(b, &m) != nil || len(m) < 2 || m[0] != "requestRepair" {
				continue
			}
			asked <- m
			data, _ := json.Marshal(m[1])
			send(`["repairing",` + string(data) + `]`)
			send(`["worldChange",{"timestamp":1700000000002,"changes":[{"type":"add","id":"grid-1","owner":"` + server + `","properties":{"position":[0,0,0]},"scopes":{"blocks":{"ver":3,"added":{"a":{"c":1},"b":{"c":2}},"full":true}}}]}]`)
			send(`["repaired",` + string(data) + `]`)
		}
	}))
	t.Cleanup(up.Close)
	p, _ := startProxy(t, wiretest.WSURL(up), relay.Options{Tick: 5 * time.Millisecond, DigestInterval: time.Hour})
	repairsAllowed[p] = true // the gap is a divergence, repaired
	select {
	case m := <-asked:
		// docs/protocol.md's vector: grid-1 is in bucket 3423 of 4096.
		if got, _ := json.Marshal(m[1]); string(got) != `{"buckets":[3423],"of":4096}` {
			t.Errorf("asked for %s, want bucket 3423 of 4096", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no request for the object 5 s after the gap; its copy is %s", scopeOf(p.World(), "grid-1", "blocks"))
	}
	want := `{"a":{"c":1},"b":{"c":2}}`
	waitFor(t, "the repaired grid", 5*time.Second, func() bool {
		return sameJSON([]byte(scopeOf(p.World(), "grid-1", "blocks")), []byte(want))
	})
	if r := p.Repairs(); r[relay.RepairStale] != 1 {
		t.Errorf("repairs %v, want one stale object", r)
	}
}

// TestRepairRequestsCloseTogether: a peer's second repair request within
// antientropy.MinGap of the first (a gap's, right after a digest's) is answered
// a moment later, not dropped: the peer would wait on it.
func TestRepairRequestsCloseTogether(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	w := wiretest.Dial(t, url, "client-BBBBBBBB-BBBBBBBB", wiretest.Options{})
	w.Change(wiretest.Add("obj-1", "client-BBBBBBBB-BBBBBBBB", props{"n": 1}))
	waitFor(t, "the object", 5*time.Second, func() bool { _, ok := n.World().Get("obj-1"); return ok })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	send := func(s string) {
		if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(`["metadataChange",{"identifier":"client-CCCCCCCC-CCCCCCCC","identifierChain":["client-CCCCCCCC-CCCCCCCC"],"features":["ownership","digest","scopes"]}]`)
	time.Sleep(100 * time.Millisecond) // the node takes the metadata
	bucket := gameworld.IDHash("obj-1") % antientropy.GapBuckets
	send(fmt.Sprintf(`["requestRepair",{"of":4096,"buckets":[%d]}]`, bucket))
	send(fmt.Sprintf(`["requestRepair",{"of":4096,"buckets":[%d]}]`, (bucket+1)%antientropy.GapBuckets))
	repaired := 0
	for repaired < 2 {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("%d of 2 requests answered: %v", repaired, err)
		}
		if strings.HasPrefix(string(b), `["repaired"`) {
			repaired++
		}
	}
}
