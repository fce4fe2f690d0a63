package alloverse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

type place struct {
	node   *relay.Node
	bridge *Bridge
	ws     string // Solipsism endpoint
	allo   string // Alloverse endpoint
}

// startPlace runs a server node and its bridge behind a real HTTP server
// on 127.0.0.1.
func startPlace(t *testing.T, opts Options) *place {
	t.Helper()
	return startPlaceWith(t, opts, relay.Options{Tick: 5 * time.Millisecond})
}

// startPlaceWith is startPlace with the node's options.
func startPlaceWith(t *testing.T, opts Options, nodeOpts relay.Options) *place {
	t.Helper()
	n, err := relay.New(nodeOpts)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 10 * time.Millisecond
	}
	b, err := New(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	mux.Handle("/alloverse", b.Handler(HandlerOptions{ReadLimit: 64 << 10}))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
		srv.Close()
	})
	base := "ws" + strings.TrimPrefix(srv.URL, "http")
	return &place{node: n, bridge: b, ws: base + "/ws", allo: base + "/alloverse"}
}

func (p *place) solipsist(t *testing.T, prefix string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, p.ws, client.Options{Prefix: prefix, Tick: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (p *place) agent(t *testing.T, opts ClientOptions) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialClient(ctx, p.allo, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// caughtUp waits until c holds the bridge's current revision and checks
// that its document is the bridge's.
func caughtUp(t *testing.T, p *place, c *Client) {
	t.Helper()
	var want []byte
	waitFor(t, "the client to reach the bridge's revision", 10*time.Second, func() bool {
		p.bridge.mu.Lock()
		rev := p.bridge.st.rev
		want = docOf(p.bridge.st)
		p.bridge.mu.Unlock()
		_, got, ok := c.Document()
		return ok && got == rev
	})
	got, rev, _ := c.Document()
	if !sameJSON(got, want) {
		t.Fatalf("revision %d: client has\n%s\nserver has\n%s", rev, got, want)
	}
}

// acked waits until every session of the place has acknowledged the
// bridge's revision: from then on none of them needs a set while its base
// stays in history, and the next change reaches each as that change alone
// (against an older acknowledgement, a diff carries all since).
func acked(t *testing.T, p *place) {
	t.Helper()
	waitFor(t, "every client's acknowledgement", 10*time.Second, func() bool {
		p.bridge.mu.Lock()
		defer p.bridge.mu.Unlock()
		for s := range p.bridge.sessions {
			if s.ack == 0 || s.ack < p.bridge.st.rev {
				return false
			}
		}
		return true
	})
}

// entities decodes a document's entities.
func entities(t *testing.T, doc []byte) map[string]map[string]json.RawMessage {
	t.Helper()
	var d struct {
		Entities map[string]struct {
			Components map[string]json.RawMessage `json:"components"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]json.RawMessage{}
	for id, e := range d.Entities {
		out[id] = e.Components
	}
	return out
}

// TestFollowWorld: Solipsism clients move objects; an Alloverse client
// follows through a set, then diffs, and holds the server's document at
// every revision it reaches.
func TestFollowWorld(t *testing.T) {
	p := startPlace(t, Options{})
	alice, bob := p.solipsist(t, "alice"), p.solipsist(t, "bob")
	ball, _ := alice.Create(map[string]any{"kind": "ball", "transform": []float64{0, 0, 0}})
	cube, _ := bob.Create(map[string]any{"kind": "cube", "color": map[string]any{"r": 1, "g": 0}})
	c := p.agent(t, ClientOptions{})
	caughtUp(t, p, c)
	for i := 1; i <= 30; i++ {
		alice.Set(ball, map[string]any{"transform": []float64{float64(i), 0, 0}})
		if i%3 == 0 {
			bob.Set(cube, map[string]any{"color": map[string]any{"r": i}})
		}
		if i == 10 {
			bob.Set(cube, map[string]any{"gone": nil})
		}
		before := p.bridge.Revision()
		waitFor(t, "a new revision", 5*time.Second, func() bool { return p.bridge.Revision() != before })
		caughtUp(t, p, c)
	}
	// The two writers' last changes travel on two links: wait until the
	// bridge holds both, then until the client does.
	waitFor(t, "the last writes at the bridge", 5*time.Second, func() bool {
		p.bridge.mu.Lock()
		ents := entities(t, docOf(p.bridge.st))
		p.bridge.mu.Unlock()
		return string(ents[ball]["transform"]) == "[30,0,0]" && string(ents[cube]["color"]) == `{"r":30}`
	})
	caughtUp(t, p, c)
	doc, _, _ := c.Document()
	ents := entities(t, doc)
	if string(ents[ball]["transform"]) != "[30,0,0]" || string(ents[cube]["kind"]) != `"cube"` {
		t.Fatalf("final document %s", doc)
	}
	if _, ok := ents[cube]["gone"]; ok {
		t.Error("a null property shows as a component")
	}
	st := c.Stats()
	if st.Sets < 1 || st.Merges+st.Applies < 20 || st.Failed > 0 {
		t.Fatalf("stats %+v: want a set, then diffs", st)
	}
	alice.Remove(ball)
	waitFor(t, "the ball to leave the document", 5*time.Second, func() bool {
		doc, _, _ := c.Document()
		_, ok := entities(t, doc)[ball]
		return !ok
	})
	caughtUp(t, p, c)
}

// burst drops in runs: run out of every period calls, 20% for 20 of 100.
func burst(run, period int) func() bool {
	var n atomic.Int64
	return func() bool { return int(n.Add(1)%int64(period)) < run }
}

// TestLoss: a client that loses 20% of its state packets and 20% of its
// acknowledgements (in runs longer than the history) over 1,000 heartbeats
// keeps converging, and gets sets when its base has left history. The
// heartbeat (10 ms) leaves a client under the race detector on a slow
// machine time to take each packet in, so that its sets come from the lost
// runs, not from falling behind.
func TestLoss(t *testing.T) {
	p := startPlace(t, Options{Heartbeat: 10 * time.Millisecond, History: 16})
	alice := p.solipsist(t, "alice")
	var ids []string
	for i := range 20 {
		id, _ := alice.Create(map[string]any{"n": i, "transform": []float64{0, 0, 0}})
		ids = append(ids, id)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var rmu = make(chan struct{}, 1)
	rmu <- struct{}{}
	dropState := func() bool { <-rmu; defer func() { rmu <- struct{}{} }(); return r.IntN(5) == 0 }
	c := p.agent(t, ClientOptions{DropState: dropState, DropAck: burst(20, 100)})
	start := p.bridge.beats.Load()
	ctx, cancel := context.WithCancel(context.Background())
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for i := 0; ctx.Err() == nil; i++ {
			alice.Set(ids[i%len(ids)], map[string]any{"transform": []float64{float64(i), 1, 2}})
			if i%50 == 0 {
				alice.Set(ids[i%len(ids)], map[string]any{"extra": nil, "label": fmt.Sprint("é/~", i)})
			}
			time.Sleep(time.Millisecond)
		}
	}()
	waitFor(t, "1,000 heartbeats", 60*time.Second, func() bool { return p.bridge.beats.Load()-start >= 1000 })
	cancel()
	<-moved
	caughtUp(t, p, c)
	st := c.Stats()
	t.Logf("client: %+v", st)
	if st.Sets < 2 {
		t.Errorf("no set after the first (%+v): the base never left history", st)
	}
	if st.Merges+st.Applies < 250 {
		t.Errorf("too few diffs: %+v", st)
	}
}

// TestRevisionWrap: revisions pass 2^53 and start again at 0, while
// clients acknowledge on both sides of the wrap.
func TestRevisionWrap(t *testing.T) {
	p := startPlace(t, Options{FirstRevision: MaxRevision - 5})
	alice := p.solipsist(t, "alice")
	ball, _ := alice.Create(map[string]any{"x": 0})
	early := p.agent(t, ClientOptions{})
	caughtUp(t, p, early)
	acked(t, p)
	var late *Client
	var lateSets uint64
	earlySets := early.Stats().Sets
	for i := 1; i <= 12; i++ {
		alice.Set(ball, map[string]any{"x": i})
		before := p.bridge.Revision()
		waitFor(t, "a new revision", 5*time.Second, func() bool { return p.bridge.Revision() != before })
		caughtUp(t, p, early)
		if i == 3 {
			late = p.agent(t, ClientOptions{})
			caughtUp(t, p, late)
			acked(t, p)
			lateSets = late.Stats().Sets
		}
		if late != nil {
			caughtUp(t, p, late)
		}
	}
	if rev := p.bridge.Revision(); rev >= MaxRevision-5 || rev > 10 {
		t.Fatalf("revision %d did not wrap", rev)
	}
	for i, c := range []*Client{early, late} {
		sets := []uint64{earlySets, lateSets}[i]
		if st := c.Stats(); st.Sets != sets || st.Failed != 0 || st.Merges+st.Applies < 8 {
			t.Errorf("client %d: stats %+v: want diffs across the wrap and no set after the first acknowledgement (%d)", i, st, sets)
		}
	}
}

// TestInteractions: an agent announces, spawns, changes and removes its
// entities, seen by a Solipsism client; it cannot touch others'; its
// entities go when it disconnects.
func TestInteractions(t *testing.T) {
	p := startPlace(t, Options{PlaceName: "testplace"})
	alice := p.solipsist(t, "alice")
	rock, _ := alice.Create(map[string]any{"kind": "rock"})
	c := p.agent(t, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := func(body ...any) []json.RawMessage {
		t.Helper()
		r, err := c.Request(ctx, body...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	isError := func(r []json.RawMessage) bool { return responseError(r) != nil }

	if r := req("spawn_entity", map[string]any{"x": 1}); !isError(r) {
		t.Fatalf("spawn before announce: %s", r)
	}
	// A version this place does not speak: allonet's place server's
	// answer and close code.
	for _, v := range []int{2, 5} {
		old := p.agent(t, ClientOptions{})
		r, err := old.Request(ctx, "announce", "version", v, "identity", map[string]any{}, "spawn_avatar", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		if want := `["announce","error",1003,"Please update your app. Outdated network protocol."]`; string(mustJSON(r)) != want {
			t.Fatalf("announce of version %d: %s, want %s", v, mustJSON(r), want)
		}
		waitFor(t, "the outdated client disconnected", 5*time.Second, func() bool { return old.Err() != nil })
		if code := websocket.CloseStatus(old.Err()); code != websocket.StatusCode(StatusOutdatedVersion) {
			t.Fatalf("version %d: closed with %v, want %d", v, old.Err(), StatusOutdatedVersion)
		}
	}
	avatar, agentID, err := c.Announce(ctx, map[string]any{"visor": map[string]any{"name": "me"}})
	if err != nil {
		t.Fatal(err)
	}
	r := req("announce", "version", 3, "identity", map[string]any{}, "spawn_avatar", map[string]any{})
	if !isError(r) {
		t.Fatalf("second announce: %s", r)
	}
	waitFor(t, "alice to see the avatar, owned by the agent", 5*time.Second, func() bool {
		o, ok := alice.World().Get(avatar)
		return ok && o.Owner == agentID && string(o.Properties.Value("visor")) == `{"name":"me"}`
	})

	r = req("spawn_entity", map[string]any{"geometry": "box", "children": []any{map[string]any{"geometry": "lid"}, map[string]any{"geometry": "handle", "children": []any{map[string]any{"geometry": "knob"}}}}})
	var box string
	if isError(r) || json.Unmarshal(r[1], &box) != nil {
		t.Fatalf("spawn: %s", r)
	}
	children := func(parent string) []string {
		var out []string
		for _, o := range alice.World().Objects() {
			if parentOf(o.Properties) == parent && o.Owner == agentID {
				out = append(out, o.ID)
			}
		}
		return out
	}
	waitFor(t, "alice to see the box and its children", 5*time.Second, func() bool { return len(children(box)) == 2 })

	if r := req("change_components", box, "add_or_change", map[string]any{"color": "red"}, "remove", []string{"geometry"}); isError(r) {
		t.Fatalf("change: %s", r)
	}
	waitFor(t, "alice to see the change", 5*time.Second, func() bool {
		o, _ := alice.World().Get(box)
		return string(o.Properties.Value("color")) == `"red"` && string(o.Properties.Value("geometry")) == "null"
	})
	waitFor(t, "the agent's own view of the change", 5*time.Second, func() bool {
		doc, _, _ := c.Document()
		comps := entities(t, doc)[box]
		return string(comps["color"]) == `"red"` && comps["geometry"] == nil
	})

	t.Run("forged writes are refused", func(t *testing.T) {
		for _, body := range [][]any{
			{"change_components", rock, "add_or_change", map[string]any{"kind": "gold"}},
			{"remove_entity", rock, "cascade"},
			{"change_components", "no-such-entity", "add_or_change", map[string]any{"a": 1}},
		} {
			if r := req(body...); !isError(r) {
				t.Errorf("%v: %s", body, r)
			}
		}
		time.Sleep(50 * time.Millisecond)
		if o, ok := alice.World().Get(rock); !ok || string(o.Properties.Value("kind")) != `"rock"` {
			t.Errorf("alice's rock changed: %+v", o)
		}
	})

	t.Run("Solipsism changes reach the agent", func(t *testing.T) {
		alice.Set(rock, map[string]any{"kind": "pebble"})
		waitFor(t, "the agent to see the pebble", 5*time.Second, func() bool {
			doc, _, _ := c.Document()
			return string(entities(t, doc)[rock]["kind"]) == `"pebble"`
		})
	})

	t.Run("remove with reparent and cascade", func(t *testing.T) {
		kids := children(box)
		var handle string
		for _, k := range kids {
			if len(children(k)) == 1 {
				handle = k
			}
		}
		knob := children(handle)[0]
		if r := req("remove_entity", handle, "reparent"); isError(r) {
			t.Fatalf("reparent: %s", r)
		}
		waitFor(t, "the knob to move up to the box", 5*time.Second, func() bool {
			o, ok := alice.World().Get(knob)
			_, handleLeft := alice.World().Get(handle)
			return ok && parentOf(o.Properties) == box && !handleLeft
		})
		if r := req("remove_entity", box, "cascade"); isError(r) {
			t.Fatalf("cascade: %s", r)
		}
		waitFor(t, "the box and what hangs from it to go", 5*time.Second, func() bool {
			for _, id := range append(kids, box, knob) {
				if _, ok := alice.World().Get(id); ok {
					return false
				}
			}
			return true
		})
	})

	t.Run("disconnect removes the agent's entities", func(t *testing.T) {
		if r := req("spawn_entity", map[string]any{"geometry": "ball"}); isError(r) {
			t.Fatal(r)
		}
		waitFor(t, "two entities of the agent", 5*time.Second, func() bool {
			n := 0
			for _, o := range alice.World().Objects() {
				if o.Owner == agentID {
					n++
				}
			}
			return n == 2
		})
		c.Close()
		waitFor(t, "the agent's entities to go", 5*time.Second, func() bool {
			for _, o := range alice.World().Objects() {
				if o.Owner == agentID {
					return false
				}
			}
			return true
		})
		if _, ok := alice.World().Get(rock); !ok {
			t.Error("alice's rock went too")
		}
	})
}

// TestBadInput: malformed frames close the connection with a clear code;
// bogus acknowledgements change nothing; other clients never notice.
func TestBadInput(t *testing.T) {
	p := startPlace(t, Options{})
	alice := p.solipsist(t, "alice")
	ball, _ := alice.Create(map[string]any{"x": 0})
	bystander := p.agent(t, ClientOptions{})
	caughtUp(t, p, bystander)
	acked(t, p)
	sets := bystander.Stats().Sets
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, c := range []struct {
		name  string
		typ   websocket.MessageType
		frame []byte
		code  websocket.StatusCode
	}{
		{"binary", websocket.MessageBinary, []byte{1, 2, 3}, websocket.StatusUnsupportedData},
		{"not JSON", websocket.MessageText, []byte(`{"cmd":`), websocket.StatusInvalidFramePayloadData},
		{"short interaction", websocket.MessageText, []byte(`["interaction","request"]`), websocket.StatusInvalidFramePayloadData},
		{"interaction without a body", websocket.MessageText, []byte(`["interaction","request","","place","1",[]]`), websocket.StatusInvalidFramePayloadData},
		{"too big", websocket.MessageText, append(append([]byte(`{"pad":"`), strings.Repeat("x", 70<<10)...), `"}`...), websocket.StatusMessageTooBig},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, _, err := websocket.Dial(ctx, p.allo, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.CloseNow()
			conn.Write(ctx, c.typ, c.frame)
			for {
				_, _, err := conn.Read(ctx)
				if err != nil {
					if got := websocket.CloseStatus(err); got != c.code {
						t.Fatalf("closed with %v (%v), want %v", got, err, c.code)
					}
					return
				}
			}
		})
	}

	t.Run("bogus acks", func(t *testing.T) {
		conn, _, err := websocket.Dial(ctx, p.allo, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		for _, ack := range []string{`99999999999`, `-1`, `1.5`, `1e300`, `"7"`, `null`, `{}`, `9007199254740993`, `0`} {
			conn.Write(ctx, websocket.MessageText, []byte(`{"cmd":"intent","intent":{"ack_state_rev":`+ack+`}}`))
		}
		conn.Write(ctx, websocket.MessageText, []byte(`{"cmd":"something else"}`))
		conn.Write(ctx, websocket.MessageText, []byte(`["not an interaction"]`))
		alice.Set(ball, map[string]any{"x": 1})
		// Still served: sets keep coming, as the last usable ack was 0.
		for range 3 {
			_, pkt, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("connection closed: %v", err)
			}
			if !strings.HasPrefix(string(pkt), `{"patch_style":"set"`) {
				t.Fatalf("packet %.80s", pkt)
			}
		}
	})
	caughtUp(t, p, bystander)
	if st := bystander.Stats(); st.Failed != 0 || st.Sets != sets {
		t.Errorf("the bystander noticed: %+v", st)
	}
}

// TestStateHandler: the place's document, as its clients get it, for an
// operator: every entity, the revision, and what each client acknowledged
// (the one here is up to date); writes are refused.
func TestStateHandler(t *testing.T) {
	p := startPlace(t, Options{})
	alice := p.solipsist(t, "alice")
	ball, _ := alice.Create(map[string]any{"kind": "ball"})
	c := p.agent(t, ClientOptions{})
	caughtUp(t, p, c)
	srv := httptest.NewServer(p.bridge.StateHandler())
	defer srv.Close()
	type served struct {
		Sessions []struct{ Ack, Sent uint64 }
		Revision uint64
		Entities map[string]struct{ Components map[string]json.RawMessage }
	}
	get := func() (served, string) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc served
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return doc, string(body)
	}
	// (The client's acknowledgement reaches the place after the client
	// has the revision.)
	waitFor(t, "the place serves its document and the client's acknowledgement of it", 5*time.Second, func() bool {
		doc, _ := get()
		return doc.Revision == p.bridge.Revision() && string(doc.Entities[ball].Components["kind"]) == `"ball"` &&
			len(doc.Sessions) == 1 && doc.Sessions[0].Ack == doc.Revision && doc.Sessions[0].Sent == doc.Revision
	})
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}

// TestEmptyPlaceSendsItsFirstState: a client of a place whose world has
// never changed is sent its first state (an empty set) at once, as it is
// once anything changed: it can tell "empty" from "not yet synced". The
// node runs a while first, and several clients come, one after the other.
func TestEmptyPlaceSendsItsFirstState(t *testing.T) {
	p := startPlace(t, Options{})
	time.Sleep(200 * time.Millisecond) // 20 heartbeats of an empty place
	var revs []uint64
	for range 3 {
		c := p.agent(t, ClientOptions{})
		waitFor(t, "the first state", 5*time.Second, func() bool { _, _, ok := c.Document(); return ok })
		doc, rev, _ := c.Document()
		if ents := entities(t, doc); len(ents) != 0 || rev == 0 {
			t.Fatalf("first state: revision %d, %d entities: %s", rev, len(ents), doc)
		}
		revs = append(revs, rev)
		caughtUp(t, p, c)
	}
	t.Logf("first revisions %v", revs)
}

// TestBridgeSleepsWithoutClients: a bridge without clients makes no
// heartbeats (the node sends it nothing then); the first client wakes it
// and gets the world as it is, changes made while it slept included, and
// the bridge sleeps again once its clients are gone, holding no history.
func TestBridgeSleepsWithoutClients(t *testing.T) {
	p := startPlace(t, Options{Heartbeat: 10 * time.Millisecond})
	alice := p.solipsist(t, "alice")
	id, err := alice.Create(map[string]any{"label": "first-label", "transform": []float64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	still := func(what string) {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // (a heartbeat under way may end)
		before := p.bridge.beats.Load()
		time.Sleep(300 * time.Millisecond) // 30 heartbeats
		if n := p.bridge.beats.Load() - before; n != 0 {
			t.Fatalf("%s: %d heartbeats without a client", what, n)
		}
	}
	holds := func(c *Client, label string) func() bool {
		return func() bool { doc, _, ok := c.Document(); return ok && strings.Contains(string(doc), label) }
	}
	still("before any client")
	c := p.agent(t, ClientOptions{})
	waitFor(t, "the object", 5*time.Second, holds(c, "first-label"))
	c.Close()
	waitFor(t, "the client to leave", 5*time.Second, func() bool {
		p.bridge.mu.Lock()
		defer p.bridge.mu.Unlock()
		return len(p.bridge.sessions) == 0
	})
	if err := alice.Set(id, map[string]any{"label": "second-label"}); err != nil {
		t.Fatal(err)
	}
	still("after the client left")
	p.bridge.mu.Lock()
	kept, ents := len(p.bridge.st.hist), len(p.bridge.st.entities)
	p.bridge.mu.Unlock()
	if kept != 0 {
		t.Fatalf("the sleeping bridge keeps %d revisions of history", kept)
	}
	// Without a client it wants nothing of the world: the node hides
	// what it had sent it, and the removes, which come after the last
	// heartbeat with a client, are taken before it sleeps.
	if n := p.bridge.inbox.Len(); ents != 0 || n != 0 {
		t.Fatalf("the sleeping bridge holds %d entities, and %d deliveries wait for it", ents, n)
	}
	c2 := p.agent(t, ClientOptions{})
	waitFor(t, "the object as it is now", 5*time.Second, holds(c2, "second-label"))
	caughtUp(t, p, c2)
}

// TestBridgeLetsTheWorldGoWithoutClients: when the last client leaves,
// the node hides the world from the bridge while the bridge's next
// heartbeat may already have taken its inbox (the heartbeat waits for the
// lock the leaving session holds). The removes must still be taken before
// the bridge sleeps: a bridge that slept on them held a load's world, and
// its deliveries, until the next client came.
func TestBridgeLetsTheWorldGoWithoutClients(t *testing.T) {
	p := startPlace(t, Options{Heartbeat: time.Millisecond})
	const objects = 2000
	changes := make([]gameworld.Change, objects)
	for i := range changes {
		changes[i] = gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o-%d", i),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"transform": json.RawMessage(`[0,0,0]`)})}
	}
	if _, err := p.node.Apply(changes); err != nil {
		t.Fatal(err)
	}
	held := func() (ents, waiting int) {
		p.bridge.mu.Lock()
		defer p.bridge.mu.Unlock()
		return len(p.bridge.st.entities), p.bridge.inbox.Len()
	}
	for round := range 10 {
		c := p.agent(t, ClientOptions{})
		waitFor(t, "the world", 10*time.Second, func() bool { ents, _ := held(); return ents >= objects })
		c.Close()
		waitFor(t, "the client to leave", 5*time.Second, func() bool {
			p.bridge.mu.Lock()
			defer p.bridge.mu.Unlock()
			return len(p.bridge.sessions) == 0
		})
		time.Sleep(100 * time.Millisecond) // 100 heartbeats, were it awake
		if ents, waiting := held(); ents != 0 || waiting != 0 {
			t.Fatalf("round %d: the sleeping bridge holds %d entities, and %d deliveries wait for it", round, ents, waiting)
		}
	}
}
