package relay_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// TestLiveChangeOvertakesBurstWhileJoining: a proxy on a slow link is
// working through a burst of 20,000 removes (a client that held that many
// objects left) when a client joins behind it, which makes the node hand
// the proxy resume tokens. Tokens do not depend on the records around
// them: they must not hold up what comes after them. A change made at the
// node right after reaches the proxy before the burst's last remove,
// where it once waited for the whole burst (seconds, at scale).
func TestLiveChangeOvertakesBurstWhileJoining(t *testing.T) {
	_, url := startNode(t, relay.Options{})
	const proxyID = "proxy-PPPPPPPP-PPPPPPPP"
	p := wiretest.Dial(t, url, proxyID, wiretest.Options{ReadDelay: 50 * time.Millisecond})
	f := wiretest.Dial(t, url, "flood-FFFFFFFF-FFFFFFFF", wiretest.Options{})
	c := wiretest.Dial(t, url, "maker-MMMMMMMM-MMMMMMMM", wiretest.Options{})
	const n = 20000
	addMany(f, n)
	waitUntilObjects(t, p, n, 60*time.Second)

	f.Close()
	// Wait for the first slice of removes, so the burst is under way.
	waitFor(t, "the burst under way", 10*time.Second, func() bool { return len(p.Objects()) < n })
	if err := p.Send("metadataChange", map[string]any{"identifier": proxyID, "identifierChain": []string{proxyID, "client-JJJJJJJJ-JJJJJJJJ"}, "role": "proxy"}); err != nil {
		t.Fatal(err)
	}
	c.Change(wiretest.Add("probe", c.ID, map[string]any{"live": true}))
	waitFor(t, "the burst sent", 60*time.Second, func() bool { return len(p.Objects()) == 1 })

	probeAt, lastRemoveAt := -1, -1
	for i, m := range p.Messages() {
		if m.Type != "worldChange" {
			continue
		}
		var wc struct {
			Changes []struct{ Type, ID string } `json:"changes"`
		}
		if err := json.Unmarshal(m.Data, &wc); err != nil {
			t.Fatal(err)
		}
		for _, ch := range wc.Changes {
			switch {
			case ch.ID == "probe":
				probeAt = i
			case ch.Type == "remove" && strings.HasPrefix(ch.ID, "f-"):
				lastRemoveAt = i
			}
		}
	}
	if probeAt < 0 || probeAt > lastRemoveAt {
		t.Fatalf("the live change came in message %d, the burst's last remove in message %d: it waited for the burst", probeAt, lastRemoveAt)
	}
	if _, ok := p.Objects()["probe"]; !ok {
		t.Fatal("the proxy lacks the live object")
	}
	p.CheckClean()
}

// waitUntilObjects waits until p holds n objects.
func waitUntilObjects(t *testing.T, p *wiretest.Peer, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s holds %d objects", p.ID, n), timeout, func() bool { return len(p.Objects()) == n })
}

// TestLiveChangeOvertakesBurstAcrossMesh: member a is sending member b a
// burst of 20,000 adds (one client's message) when a client joins a and
// adds an object. The join is announced to b at once and the client's
// object overtakes the burst: b applies it before the burst's last add. At
// the end both members hold the same world, with no repair.
func TestLiveChangeOvertakesBurstAcrossMesh(t *testing.T) {
	nodes := startMesh(t, 2, cluster.Options{})
	a, b := nodes[0], nodes[1]
	watcher := wiretest.Dial(t, b.url, "watch-WWWWWWWW-WWWWWWWW", wiretest.Options{})
	f := wiretest.Dial(t, a.url, "flood-FFFFFFFF-FFFFFFFF", wiretest.Options{})
	const n = 20000

	var mu sync.Mutex
	probeAt, lastAddAt, seq := -1, -1, 0
	cancel := b.node.World().Subscribe(func(ap gameworld.Applied) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ap.Records {
			seq++
			switch {
			case r.ID == "probe":
				probeAt = seq
			case r.Type == gameworld.Add && strings.HasPrefix(r.ID, "f-"):
				lastAddAt = seq
			}
		}
	})
	defer cancel()
	recs := make([]map[string]any, n)
	for i := range recs {
		recs[i] = wiretest.Add(fmt.Sprintf("f-%d", i), f.ID, map[string]any{"i": i})
	}
	f.Change(recs...)
	waitFor(t, "the burst under way", 30*time.Second, func() bool { return b.node.World().Len() > 0 })
	maker := wiretest.Dial(t, a.url, "maker-MMMMMMMM-MMMMMMMM", wiretest.Options{})
	maker.Change(wiretest.Add("probe", maker.ID, map[string]any{"live": true}))
	waitFor(t, "the burst sent", 60*time.Second, func() bool { return b.node.World().Len() == n+1 })
	mu.Lock()
	defer mu.Unlock()
	if probeAt < 0 || probeAt > lastAddAt {
		t.Fatalf("b applied the live object as record %d, the burst's last add as %d: it waited for the burst", probeAt, lastAddAt)
	}
	if d := worldDiff(a.node.World(), b.node.World()); d != "" {
		t.Fatalf("the members differ: %s", d)
	}
	watcher.Wait("the watcher's view", 20*time.Second, func(objs map[string]wiretest.Object) bool { return len(objs) == n+1 })
	watcher.CheckClean()
}

// addMany has p add n objects f-0 … f-(n-1), in messages of 5,000.
func addMany(p *wiretest.Peer, n int) {
	recs := make([]map[string]any, 0, n)
	for i := range n {
		recs = append(recs, wiretest.Add(fmt.Sprintf("f-%d", i), p.ID, map[string]any{"i": i}))
	}
	for i := 0; i < n; i += 5000 {
		p.Change(recs[i:min(n, i+5000)]...)
	}
}
