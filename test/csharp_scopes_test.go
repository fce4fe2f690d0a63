package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/internal/wiretest"
)

// goScope returns a scope of an object in a Go client's world as its
// version and elements (JSON), "0 {}" if it has none.
func goScope(c *client.Client, id, name string) (uint64, string) {
	o, ok := c.World().Get(id)
	if !ok {
		return 0, "{}"
	}
	b, _ := o.Scopes.AppendJSON(nil, name)
	if len(b) == 0 {
		b = []byte("{}")
	}
	return o.Scopes.Ver(name), string(b)
}

// sameScope compares a C# client's "SCOPE" answer (version and elements)
// with a Go client's copy.
func sameScope(t testing.TB, cs string, ver uint64, elems string) bool {
	v, j, _ := strings.Cut(cs, " ")
	return v == fmt.Sprint(ver) && reflect.DeepEqual(canonical(t, []byte(j)), canonical(t, []byte(elems)))
}

// TestCSharpScopes: the C# WorldClient takes a grid's blocks as element
// deltas (never the grid whole as a property), in bursts of changes and
// removals, and ends with the Go writer's copy, version included; it
// writes its own grid element by element (a removal and a set of one
// element in one tick included), which a Go client sees, and after a
// broken link its reconnect brings the grid back as it is.
func TestCSharpScopes(t *testing.T) {
	p := startProc(t, "--tick", "20ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	grid := makeGrid(t, goc)
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", p.URL())
	cs.expect(t, "CONNECTED ", 30*time.Second)
	if got := cs.expect(t, "ADDED "+grid+" ", 10*time.Second); strings.Contains(got, "blocks") {
		t.Fatalf("the grid came with its blocks as a property: %s", got)
	}
	waitScope := func(what, id string, ver func() (uint64, string)) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			cs.send(t, "SCOPE "+id+" blocks")
			got := cs.expect(t, "SCOPE "+id+" blocks ", 10*time.Second)
			v, e := ver()
			if sameScope(t, got, v, e) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: C# holds %s, the Go client version %d %s", what, got, v, e)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitScope("the first blocks", grid, func() (uint64, string) { return goScope(goc, grid, "blocks") })

	writeBursts(t, goc, grid)
	waitScope("after the bursts", grid, func() (uint64, string) { return goScope(goc, grid, "blocks") })

	// C# writes its own grid.
	cs.send(t, `CREATE cgrid {"kind":"grid","position":[1,0,0]}`)
	cs.send(t, `ELEMENTS cgrid blocks {"0,0,0":{"t":"stone","n":1},"1,0,0":{"t":"dirt","c":"red"}}`)
	cs.expect(t, "ELEMENTS-OK cgrid", 10*time.Second)
	cs.send(t, `ELEMENTS cgrid blocks {"1,0,0":{"c":"blue"}}`)
	cs.send(t, `UNELEMENTS cgrid blocks 0,0,0`)
	cs.send(t, `ELEMENTS cgrid blocks {"0,0,0":{"t":"glass"}}`)
	want := `{"0,0,0":{"t":"glass"},"1,0,0":{"c":"blue","t":"dirt"}}`
	waitUntil(t, "the Go client to see C#'s grid", 10*time.Second, func() bool {
		_, e := goScope(goc, "cgrid", "blocks")
		return reflect.DeepEqual(canonical(t, []byte(e)), canonical(t, []byte(want)))
	})
	waitScope("C#'s own grid", "cgrid", func() (uint64, string) { return goScope(goc, "cgrid", "blocks") })

	// A broken link: C# comes back with its grid whole, and writes on.
	if n := strings.Count(cs.printed(), "LINKUP"); n != 1 {
		t.Fatalf("C#'s link came up %d times before the break (a write the node refused as a bad message?)", n)
	}
	cs.send(t, "DROP")
	cs.expect(t, "LINKUP", 10*time.Second)
	cs.send(t, `ELEMENTS cgrid blocks {"2,0,0":{"t":"sand"}}`)
	want = `{"0,0,0":{"t":"glass"},"1,0,0":{"c":"blue","t":"dirt"},"2,0,0":{"t":"sand"}}`
	waitUntil(t, "C#'s write after the reconnect", 10*time.Second, func() bool {
		_, e := goScope(goc, "cgrid", "blocks")
		return reflect.DeepEqual(canonical(t, []byte(e)), canonical(t, []byte(want)))
	})
	waitScope("C#'s grid after the reconnect", "cgrid", func() (uint64, string) { return goScope(goc, "cgrid", "blocks") })
	waitScope("the Go grid after the reconnect", grid, func() (uint64, string) { return goScope(goc, grid, "blocks") })

	// The whole world, properties and owners, against the node's.
	time.Sleep(100 * time.Millisecond)
	cs.send(t, "WORLD")
	if d := viewDiff(t, cs.expect(t, "WORLD ", 10*time.Second), worldOf(t, p), true); d != "" {
		t.Fatal(d)
	}
	cs.send(t, "QUIT")
	cs.expect(t, "BYE", 10*time.Second)
}

// TestCSharpScopeGap: a node sends the C# WorldClient a scope delta built
// on a version it never got. The client refuses it (its copy unchanged),
// asks for the object at once (docs/protocol.md's vector: grid-1 is bucket
// 3423 of 4096), and the answer's snapshot levels it; an object of that
// bucket the answer does not bring goes.
func TestCSharpScopeGap(t *testing.T) {
	url, asked := startGapNode(t)
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", url)
	cs.expect(t, "ADDED grid-1 ", 30*time.Second)
	select {
	case r := <-asked:
		if r != `{"of":4096,"buckets":[3423]}` {
			t.Errorf("asked for %s, want bucket 3423 of 4096", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not ask for the object after the gap")
	}
	cs.expect(t, "REMOVED extra-2054", 10*time.Second)
	cs.send(t, "SCOPE grid-1 blocks")
	if got := cs.expect(t, "SCOPE grid-1 blocks ", 10*time.Second); !sameScope(t, got, 3, `{"a":{"c":1},"b":{"c":2}}`) {
		t.Fatalf("after the repair C# holds %s", got)
	}
	cs.send(t, "QUIT")
	cs.expect(t, "BYE", 10*time.Second)
}

// startGapNode starts a scripted node for a client's gap test: its
// refresh answer holds grid-1 (blocks at version 1) and extra-2054 (in
// grid-1's bucket, 3423 of 4096); then it sends grid-1's version 3, built
// on 2, which never comes. It answers a repair request with grid-1 whole
// at version 3, then updates grid-1's property "cue" to "check". The
// channel receives each request's data.
func startGapNode(t *testing.T) (url string, asked <-chan string) {
	const server = "server-AAAAAAAA-AAAAAAAA"
	ch := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		send := func(s string) { c.Write(ctx, websocket.MessageText, []byte(s)) } //nolint:errcheck // the client's reads tell
		send(`["metadataChange",{"identifier":"` + server + `","identifierChain":["` + server + `"],"role":"server","features":["ownership","digest","scopes"]}]`)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var m []json.RawMessage
			if json.Unmarshal(b, &m) != nil || len(m) < 1 {
				continue
			}
			switch string(m[0]) {
			case `"requestRefresh"`:
				send(`["worldChange",{"timestamp":1700000000000,"refreshed":true,"changes":[{"type":"add","id":"grid-1","owner":"` + server + `","properties":{"kind":"grid"},"scopes":{"blocks":{"ver":1,"added":{"a":{"c":1}},"full":true}}},{"type":"add","id":"extra-2054","owner":"` + server + `","properties":{}}]}]`)
				send(`["scopeChange",{"grid-1":{"blocks":{"ver":3,"base":2,"modified":{"b":{"c":2}}}}}]`)
			case `"requestRepair"`:
				ch <- string(m[1])
				send(`["repairing",` + string(m[1]) + `]`)
				send(`["worldChange",{"timestamp":1700000000001,"changes":[{"type":"add","id":"grid-1","owner":"` + server + `","properties":{"kind":"grid"},"scopes":{"blocks":{"ver":3,"added":{"a":{"c":1},"b":{"c":2}},"full":true}}}]}]`)
				send(`["repaired",` + string(m[1]) + `]`)
				send(`["worldChange",{"timestamp":1700000000002,"changes":[{"type":"update","id":"grid-1","properties":{"cue":"check"}}]}]`)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return wiretest.WSURL(srv), ch
}

// TestCSharpSnapshotElements: the C# snapshot client writes its grid's
// blocks over UDP (wire version 2's elements): 300 blocks at once (several
// commands' worth), then changes, a removal and a block removed and set
// again in one tick; a Go WebSocket client ends with the same blocks. Its
// write to the Go client's grid is refused and changes nothing.
func TestCSharpSnapshotElements(t *testing.T) {
	udp := freeUDPAddr(t)
	p := startProc(t, "--tick", "20ms", "--snapshot-listen", udp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	if err := goc.CreateWithID("go-grid", map[string]any{"kind": "grid"}); err != nil {
		t.Fatal(err)
	}
	if err := goc.SetElements("go-grid", "blocks", map[string]map[string]any{"0,0,0": {"t": "dirt"}}); err != nil {
		t.Fatal(err)
	}
	cs := startCSharpClient(t, udp)
	ident := cs.expect(t, "CONNECTED ", 30*time.Second)
	cs.send(t, `SET cgrid {"kind":"grid"}`)
	var sb strings.Builder
	want := map[string]map[string]any{}
	sb.WriteString("{")
	for i := range 300 {
		id := fmt.Sprintf("%d,%d,0", i%20, i/20)
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"%s":{"t":"stone","n":%d}`, id, i)
		want[id] = map[string]any{"t": "stone", "n": i}
	}
	sb.WriteString("}")
	cs.send(t, "ELEMENTS cgrid blocks "+sb.String())
	cs.send(t, `ELEMENTS cgrid blocks {"1,0,0":{"c":"blue"}}`)
	want["1,0,0"]["c"] = "blue"
	cs.send(t, `UNELEMENTS cgrid blocks 2,0,0 3,0,0`)
	delete(want, "2,0,0")
	delete(want, "3,0,0")
	cs.send(t, `ELEMENTS cgrid blocks {"3,0,0":{"t":"glass"}}`)
	want["3,0,0"] = map[string]any{"t": "glass"}
	cs.send(t, `ELEMENTS go-grid blocks {"0,0,0":{"t":"gold"}}`)
	wantJSON, _ := json.Marshal(want)
	waitUntil(t, "the Go client to see C#'s blocks", 20*time.Second, func() bool {
		o, ok := goc.World().Get("cgrid")
		if !ok || o.Owner != ident {
			return false
		}
		_, e := goScope(goc, "cgrid", "blocks")
		return reflect.DeepEqual(canonical(t, []byte(e)), canonical(t, wantJSON))
	})
	time.Sleep(200 * time.Millisecond)
	if _, e := goScope(goc, "go-grid", "blocks"); e != `{"0,0,0":{"t":"dirt"}}` {
		t.Fatalf("C#'s write to the Go client's grid changed it: %s", e)
	}
}

// makeGrid has a Go client make a grid of 100 blocks and returns its id.
func makeGrid(t *testing.T, goc *client.Client) string {
	t.Helper()
	grid, err := goc.Create(map[string]any{"kind": "grid", "position": []float64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]map[string]any{}
	for i := range 100 {
		first[fmt.Sprintf("%d,0,0", i)] = map[string]any{"t": "stone", "n": i}
	}
	if err := goc.SetElements(grid, "blocks", first); err != nil {
		t.Fatal(err)
	}
	return grid
}

// writeBursts has a Go client change a grid's blocks in bursts: changes,
// removals and new blocks, some within one tick.
func writeBursts(t *testing.T, goc *client.Client, grid string) {
	t.Helper()
	for r := range 30 {
		mod := map[string]map[string]any{}
		for i := range 10 {
			mod[fmt.Sprintf("%d,0,0", (r*7+i)%100)] = map[string]any{"c": fmt.Sprintf("c%d", r)}
		}
		mod[fmt.Sprintf("%d,1,0", r)] = map[string]any{"t": "glass"}
		if err := goc.SetElements(grid, "blocks", mod); err != nil {
			t.Fatal(err)
		}
		if err := goc.RemoveElements(grid, "blocks", fmt.Sprintf("%d,0,0", (r*13)%100)); err != nil {
			t.Fatal(err)
		}
		if r%3 == 0 {
			time.Sleep(25 * time.Millisecond)
		}
	}
}
