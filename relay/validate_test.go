package relay_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/schema"
)

// TestSchemasRefuseWithReason: a node with the demo's schemas refuses a
// ball's position of nulls (NaN, as JSON carries it) from a client behind
// a proxy that checks nothing; nothing changes at the server, the writer
// is told why, and the writer and a watcher on the proxy, which had taken
// the bad value, get the node's back. A valid write then goes through.
func TestSchemasRefuseWithReason(t *testing.T) {
	srv, sURL, _, pURL := schemaChain(t)
	writer := dialClient(t, pURL, "writer")
	in := listen(writer)
	watcher := wiretest.Dial(t, pURL, "watch-AAAAAAAA-AAAAAAAA", wiretest.Options{})
	atServer := wiretest.Dial(t, sURL, "watch-BBBBBBBB-BBBBBBBB", wiretest.Options{})
	id, err := writer.Create(map[string]any{"kind": "ball", "position": []float64{0, 0.25, -3}, "velocity": []float64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	atServer.WaitProp(id, "position", "[0,0.25,-3]")
	watcher.WaitProp(id, "position", "[0,0.25,-3]")

	if err := writer.Set(id, map[string]any{"position": []any{nil, nil, nil}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the writer told why", 5*time.Second, func() bool { return len(in.ofType(relay.TypeRefused)) == 1 })
	m := in.ofType(relay.TypeRefused)[0]
	var d relay.RefusedData
	json.Unmarshal(m.Data, &d)
	// (The reason of docs/protocol.md's example.)
	const reason = `breaks the property schema of kind "ball": at '/position/0': got null, want number; at '/position/1': got null, want number; at '/position/2': got null, want number`
	if m.From != srv.Identifier() || d.ID != id || d.Reason != reason || string(d.Properties["position"]) != "[0,0.25,-3]" {
		t.Errorf("the refusal: from %s, %+v", m.From, d)
	}
	waitFor(t, "the writer has the node's value back", 5*time.Second, func() bool {
		o, _ := writer.World().Get(id)
		return string(o.Properties.Value("position")) == "[0,0.25,-3]"
	})
	watcher.WaitProp(id, "position", "[0,0.25,-3]")
	if o, _ := srv.World().Get(id); string(o.Properties.Value("position")) != "[0,0.25,-3]" {
		t.Errorf("the server holds %s", o.Properties.Value("position"))
	}
	for _, msg := range atServer.Messages() {
		if strings.Contains(string(msg.Data), "null,null") {
			t.Errorf("a watcher at the server was sent the bad value: %s", msg.Data)
		}
	}
	// An add that breaks the schema: gone again at the writer.
	bad, _ := writer.Create(map[string]any{"kind": "ball"})
	waitFor(t, "the bad ball gone at the writer", 5*time.Second, func() bool { _, ok := writer.World().Get(bad); return !ok })
	if _, ok := srv.World().Get(bad); ok {
		t.Error("the server took a ball without a position")
	}
	// A valid write goes through.
	writer.Set(id, map[string]any{"position": []float64{1, 2, 3}})
	atServer.WaitProp(id, "position", "[1,2,3]")
	watcher.WaitProp(id, "position", "[1,2,3]")
	// A peer cannot send what only nodes send.
	p := wiretest.Dial(t, sURL, "forger-AAAAAAAA-AAAAAAAA", wiretest.Options{Features: []string{"messages"}})
	time.Sleep(20 * time.Millisecond)
	p.Send("message", map[string]any{"type": relay.TypeRefused, "world": writer.Identifier(), "data": map[string]any{"id": id, "properties": map[string]any{"position": []int{9, 9, 9}}}})
	time.Sleep(100 * time.Millisecond)
	if o, _ := writer.World().Get(id); string(o.Properties.Value("position")) != "[1,2,3]" {
		t.Errorf("a forged refusal changed the writer's object: %s", o.Properties.Value("position"))
	}
	if got := len(in.ofType(relay.TypeRefused)); got != 2 {
		t.Errorf("the writer got %d refusals, want 2", got)
	}
	watcher.CheckClean()
	atServer.CheckClean()
}

// TestSchemasRefuseBlocks: with the demo's schemas, a Go client behind a
// proxy writes a block whose colour is markup, with a good block in the
// same delta: the server refuses the delta whole and tells the writer,
// whose grid (and the proxy's) goes back to the server's, version
// included; the client's next block is taken, and every copy ends equal.
func TestSchemasRefuseBlocks(t *testing.T) {
	srv, _, proxy, pURL := schemaChain(t)
	writer := dialClient(t, pURL, "writer")
	in := listen(writer)
	if err := writer.CreateWithID("grid", map[string]any{"kind": "grid", "position": []float64{0, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	if err := writer.SetElements("grid", "blocks", map[string]map[string]any{"0,0,0": {"c": "#d94f4f"}}); err != nil {
		t.Fatal(err)
	}
	const good = `{"0,0,0":{"c":"#d94f4f"}}`
	waitFor(t, "the grid at the server", 5*time.Second, func() bool { return scopeOf(srv.World(), "grid", "blocks") == good })
	if err := writer.SetElements("grid", "blocks", map[string]map[string]any{"1,1,1": {"c": "#5fd38d"}, "2,2,2": {"c": `red"><script>`}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the writer told why", 5*time.Second, func() bool { return len(in.ofType(relay.TypeRefused)) > 0 })
	if r := string(in.ofType(relay.TypeRefused)[0].Data); !strings.Contains(r, `scope \"blocks\", element \"2,2,2\": at '/c'`) {
		t.Errorf("the refusal: %s", r)
	}
	for name, w := range map[string]*gameworld.World{"writer": writer.World(), "proxy": proxy.World()} {
		waitFor(t, name+"'s grid back to the server's", 5*time.Second, func() bool { return scopeOf(w, "grid", "blocks") == good })
	}
	if err := writer.SetElements("grid", "blocks", map[string]map[string]any{"3,3,3": {"c": "#4f8fd9"}}); err != nil {
		t.Fatal(err)
	}
	const after = `{"0,0,0":{"c":"#d94f4f"},"3,3,3":{"c":"#4f8fd9"}}`
	waitFor(t, "the next block at the server", 5*time.Second, func() bool { return scopeOf(srv.World(), "grid", "blocks") == after })
	if rs := in.ofType(relay.TypeRefused); len(rs) != 1 {
		t.Errorf("the writer was told %d times, not once: %+v", len(rs), rs)
	}
	o, _ := srv.World().Get("grid")
	w, _ := writer.World().Get("grid")
	if o.Scopes.Ver("blocks") != w.Scopes.Ver("blocks") || scopeOf(writer.World(), "grid", "blocks") != after {
		t.Errorf("the writer holds version %d %s, the server %d %s", w.Scopes.Ver("blocks"), scopeOf(writer.World(), "grid", "blocks"), o.Scopes.Ver("blocks"), after)
	}
}

// schemaChain starts a server with the demo's schemas and a proxy (which
// checks nothing) under it, connected.
func schemaChain(t *testing.T) (srv *relay.Node, sURL string, proxy *relay.Node, pURL string) {
	t.Helper()
	set, err := schema.Load("../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	srv, sURL = startNode(t, relay.Options{Tick: 5 * time.Millisecond, Validator: set})
	proxy, pURL = startProxy(t, sURL, relay.Options{Tick: 5 * time.Millisecond})
	waitFor(t, "the proxy connected", 10*time.Second, func() bool { return upstreamConnected(proxy) })
	return srv, sURL, proxy, pURL
}
