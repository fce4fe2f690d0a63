package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// Worlds compared: a node's world as its API tells it, a peer's view, and
// the waits that end a test of sync by comparing every peer's whole world
// with its node's.

// worldOf returns a node process's world from its inspector API: each
// object's owner and properties.
func worldOf(t testing.TB, p *proc) map[string]wiretest.Object {
	t.Helper()
	url := "http://" + p.Addr + "/api/state?limit=1000000"
	_, body, err := tryGetWithin(url, 30*time.Second)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	var st api.State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/api/state: %v", err)
	}
	out := make(map[string]wiretest.Object, len(st.Objects))
	for _, o := range st.Objects {
		out[o.ID] = objectView(o.Owner, o.Properties)
	}
	return out
}

// clientView returns a Go client's world as worldOf does a node's.
func clientView(c *client.Client) map[string]wiretest.Object {

	objs := c.World().Objects()
	out := make(map[string]wiretest.Object, len(objs))
	for _, o := range objs {
		out[o.ID] = objectView(o.Owner, o.Properties)
	}
	return out
}

func objectView(owner string, p gameworld.Properties) wiretest.Object {
	props := map[string]json.RawMessage{}
	for k, v := range p.All() {
		props[k] = v
	}
	return wiretest.Object{Owner: owner, Properties: props}
}

// differs describes how a peer's view differs from its node's world less
// the peer's own objects ("" if it does not).
func differs(view, node map[string]wiretest.Object, self string) string {
	var diffs []string
	for id, o := range node {
		if o.Owner == self {
			continue
		}
		v, ok := view[id]
		switch {
		case !ok:
			diffs = append(diffs, "lacks "+id)
		case v.Owner != o.Owner:
			diffs = append(diffs, fmt.Sprintf("%s owned by %s, not %s", id, v.Owner, o.Owner))
		case !maps.EqualFunc(v.Properties, o.Properties, func(a, b json.RawMessage) bool { return string(a) == string(b) }):
			diffs = append(diffs, id+" has other properties")
		}
	}
	for id := range view {
		if _, ok := node[id]; !ok {
			diffs = append(diffs, "has "+id+", gone from the node")
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}

// peerAt is a peer and the node process it is connected to.
type peerAt struct {
	peer *wiretest.Peer
	node *proc
}

// waitConverged waits until every peer's view equals its node's world,
// and fails with the differences if that does not happen in time.
func waitConverged(t *testing.T, peers []peerAt, timeout time.Duration) {
	t.Helper()
	waitConvergedEach(t, func() []peerAt { return peers }, timeout)
}

// waitConvergedEach is waitConverged over the peers that current returns
// each time it looks (a test may connect peers again meanwhile; nil
// means they are not ready to be compared).
func waitConvergedEach(t *testing.T, current func() []peerAt, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		peers := current() // nil: not ready to be compared yet
		if (peers == nil || !settled(t, peers)) && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		if peers == nil {
			t.Fatalf("the peers were not all connected after %s", timeout)
		}
		bad := divergent(t, peers)
		if len(bad) == 0 {
			for _, pa := range peers {
				pa.peer.CheckClean()
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d peers differ from their node after %s:\n%s", len(bad), len(peers), timeout, strings.Join(bad, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// settled reports whether every peer holds as many objects as its node
// holds of others: counts first, as copying every view while peers catch
// up would take the CPU they need.
func settled(t *testing.T, peers []peerAt) bool {
	counts := map[*proc]map[string]int{}
	for _, pa := range peers {
		c, ok := counts[pa.node]
		if !ok {
			c = map[string]int{}
			for _, o := range worldOf(t, pa.node) {
				c[o.Owner]++
			}
			counts[pa.node] = c
		}
		want := 0
		for owner, n := range c {
			if owner != pa.peer.ID {
				want += n
			}
		}
		if pa.peer.Len() != want {
			return false
		}
	}
	return true
}

// divergent describes the peers whose view differs from their node's
// world.
func divergent(t *testing.T, peers []peerAt) []string {
	worlds := map[*proc]map[string]wiretest.Object{}
	var bad []string
	for _, pa := range peers {
		w, ok := worlds[pa.node]
		if !ok {
			w = worldOf(t, pa.node)
			worlds[pa.node] = w
		}
		if d := differs(pa.peer.Objects(), w, pa.peer.ID); d != "" {
			if err := pa.peer.Closed(); err != nil {
				d += fmt.Sprintf(" (its connection closed: %v)", err)
			}
			bad = append(bad, pa.peer.ID+": "+d)
		}
	}
	return bad
}

// joinPeers connects n 2016-style peers at once, the i-th to at(i), each
// adding one object obj-<its identifier> with "n": i.
func joinPeers(t *testing.T, n int, tag string, at func(i int) *proc) []peerAt {
	peers := make([]peerAt, n)
	var wg sync.WaitGroup
	for i := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := at(i)
			id := fmt.Sprintf("client-%08d-%s", i, tag)
			p := wiretest.Dial(t, node.URL(), id, wiretest.Options{})
			waitAsked(t, p)
			p.Change(wiretest.Add("obj-"+id, id, map[string]any{"n": i}))
			peers[i] = peerAt{p, node}
		}()
	}
	wg.Wait()
	return peers
}

// waitAsked waits until the node has sent the peer its first message (it
// asks for metadata), so that what the peer sends next is not refused as
// coming before its metadata.
func waitAsked(t *testing.T, p *wiretest.Peer) {
	waitUntil(t, p.ID+" asked for metadata", 10*time.Second, func() bool { return len(p.Messages()) > 0 })
}

// burst sends n adds in one message from a new peer on node, waits a
// little, and leaves (its objects are removed).
func burst(t *testing.T, node *proc, id string, n int, stay time.Duration) {
	t.Helper()
	b := wiretest.Dial(t, node.URL(), id, wiretest.Options{})
	waitAsked(t, b)
	time.Sleep(50 * time.Millisecond)
	recs := make([]map[string]any, n)
	for i := range recs {
		recs[i] = wiretest.Add(fmt.Sprintf("%s-%d", id, i), id, map[string]any{"i": i, "position": []int{i % 100, 0, i / 100}})
	}
	b.Change(recs...)
	time.Sleep(stay)
	b.Close()
}

// repairsOf sums solipsism_repairs_total in a node's metrics.
func repairsOf(metrics string) float64 {
	sum := 0.0
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "solipsism_repairs_total{") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			sum += v
		}
	}
	return sum
}

// countPrefix counts the ids in m that start with prefix.
func countPrefix[V any](m map[string]V, prefix string) int {
	n := 0
	for id := range m {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

// viewDiff compares a client's whole world, as its test program prints it
// (a JSON object of ids to properties, or with owned to {owner,
// properties}), with a node's; numbers compare as numbers. It describes
// the first difference, or returns "".
func viewDiff(t testing.TB, view string, node map[string]wiretest.Object, owned bool) string {
	var objs map[string]json.RawMessage
	if err := json.Unmarshal([]byte(view), &objs); err != nil {
		t.Fatalf("a world that is not JSON: %v: %s", err, view)
	}
	if len(objs) != len(node) {
		return fmt.Sprintf("the client holds %d objects, the node %d", len(objs), len(node))
	}
	for id, o := range node {
		var v struct {
			Owner      string          `json:"owner"`
			Properties json.RawMessage `json:"properties"`
		}
		if v.Properties = objs[id]; owned {
			json.Unmarshal(objs[id], &v) //nolint:errcheck // checked below
		}
		if v.Properties == nil {
			return "the client lacks " + id
		}
		props, _ := json.Marshal(o.Properties)
		if (owned && v.Owner != o.Owner) || !reflect.DeepEqual(canonical(t, v.Properties), canonical(t, props)) {
			return fmt.Sprintf("object %s: the client has %s %s, the node %s %s", id, v.Owner, v.Properties, o.Owner, props)
		}
	}
	return ""
}

// canonical decodes JSON into Go values, numbers as float64, so that
// Godot's floats and the node's numbers compare.
func canonical(t testing.TB, b []byte) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}
