package relay_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// inbox collects the messages a client receives.
type inbox struct {
	mu   sync.Mutex
	msgs []peer.AppMessage
}

func listen(c *client.Client) *inbox {
	in := &inbox{}
	c.SubscribeMessages(func(m peer.AppMessage) {
		in.mu.Lock()
		in.msgs = append(in.msgs, m)
		in.mu.Unlock()
	})
	return in
}

func (in *inbox) all() []peer.AppMessage {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]peer.AppMessage(nil), in.msgs...)
}

func (in *inbox) ofType(typ string) []peer.AppMessage {
	var out []peer.AppMessage
	for _, m := range in.all() {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// messageNet is two mesh members, a proxy under the first, a client on
// each of the three, and a 2016 watcher on each.
type messageNet struct {
	mesh           []*meshNode
	proxy          *relay.Node
	onProxy, onS1  *client.Client
	onS2           *client.Client
	in             map[*client.Client]*inbox
	watchers       []*wiretest.Peer
	proxyURL, s1WS string
}

func newMessageNet(t *testing.T) *messageNet {
	t.Helper()
	mn := &messageNet{in: map[*client.Client]*inbox{}}
	mn.mesh = startMeshWith(t, 2, cluster.Options{}, relay.Options{Tick: 5 * time.Millisecond})
	mn.s1WS = mn.mesh[0].url
	mn.proxy, mn.proxyURL = startProxy(t, mn.s1WS, relay.Options{Tick: 5 * time.Millisecond})
	waitFor(t, "the proxy connected", 10*time.Second, func() bool { return upstreamConnected(mn.proxy) })
	mn.onProxy = dialClient(t, mn.proxyURL, "viaproxy")
	mn.onS1 = dialClient(t, mn.s1WS, "ons1")
	mn.onS2 = dialClient(t, mn.mesh[1].url, "ons2")
	for _, c := range []*client.Client{mn.onProxy, mn.onS1, mn.onS2} {
		mn.in[c] = listen(c)
	}
	for i, u := range []string{mn.s1WS, mn.mesh[1].url, mn.proxyURL} {
		mn.watchers = append(mn.watchers, wiretest.Dial(t, u, fmt.Sprintf("w2016-%08d-WWWWWWWW", i), wiretest.Options{}))
	}
	// Every node knows every client (the routes of world-addressed
	// messages are the claims).
	waitFor(t, "every client known everywhere", 10*time.Second, func() bool {
		for _, m := range mn.mesh {
			ok := m.node.Claimed(mn.onProxy.Identifier()) && m.node.Claimed(mn.onS1.Identifier()) && m.node.Claimed(mn.onS2.Identifier())
			if !ok {
				return false
			}
		}
		return true
	})
	return mn
}

func TestMessagesBroadcastInOrderEverywhere(t *testing.T) {
	stop := wiretest.BusyCores()
	defer stop()
	mn := newMessageNet(t)
	const count = 300
	// Each message follows a change of the sender's object it names: a
	// receiver must already hold that change.
	id, err := mn.onProxy.Create(map[string]any{"n": -1})
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	var smu sync.Mutex
	for _, c := range []*client.Client{mn.onS1, mn.onS2} {
		c := c
		c.SubscribeMessages(func(m peer.AppMessage) {
			var n int
			json.Unmarshal(m.Data, &n)
			o, ok := c.World().Get(id)
			var have int
			if ok {
				json.Unmarshal(o.Properties.Value("n"), &have)
			}
			// (Changes coalesce: the receiver may hold a later one.)
			if m.Type == "tick" && (!ok || have < n) {
				smu.Lock()
				stale = append(stale, fmt.Sprintf("%s got message %d before the change it follows", c.Identifier(), n))
				smu.Unlock()
			}
		})
	}
	for i := range count {
		if err := mn.onProxy.Set(id, map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
		if err := mn.onProxy.Send(peer.AppMessage{Type: "tick", Data: json.RawMessage(fmt.Sprint(i)), From: "forged"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*client.Client{mn.onS1, mn.onS2} {
		in := mn.in[c]
		waitFor(t, c.Identifier()+" received every message", 20*time.Second, func() bool { return len(in.ofType("tick")) >= count })
		got := in.ofType("tick")
		if len(got) != count {
			t.Fatalf("%s received %d messages, want %d", c.Identifier(), len(got), count)
		}
		for i, m := range got {
			if string(m.Data) != fmt.Sprint(i) || m.From != mn.onProxy.Identifier() {
				t.Fatalf("%s: message %d is %s from %s, want %d from %s", c.Identifier(), i, m.Data, m.From, i, mn.onProxy.Identifier())
			}
		}
	}
	smu.Lock()
	if len(stale) > 0 {
		t.Errorf("messages overtook changes: %v", stale[:min(len(stale), 5)])
	}
	smu.Unlock()
	time.Sleep(50 * time.Millisecond)
	if n := len(mn.in[mn.onProxy].ofType("tick")); n != 0 {
		t.Errorf("the sender received %d of its own messages", n)
	}
	for _, w := range mn.watchers {
		if v := w.Violations(); len(v) > 0 {
			t.Errorf("a 2016 peer was sent what breaks it: %v", v)
		}
	}
}

func TestMessagesToOneWorld(t *testing.T) {
	mn := newMessageNet(t)
	// From the far side of the mesh to the client behind the proxy, and
	// back: only the addressee receives it.
	if err := mn.onS2.Send(peer.AppMessage{Type: "dm", World: mn.onProxy.Identifier(), Data: json.RawMessage(`"hi"`)}); err != nil {
		t.Fatal(err)
	}
	if err := mn.onProxy.Send(peer.AppMessage{Type: "dm", World: mn.onS2.Identifier(), Data: json.RawMessage(`"hello"`)}); err != nil {
		t.Fatal(err)
	}
	// A world no one has: nowhere.
	if err := mn.onS1.Send(peer.AppMessage{Type: "dm", World: "nobody-AAAAAAAA-AAAAAAAA"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the direct messages arrived", 10*time.Second, func() bool {
		return len(mn.in[mn.onProxy].ofType("dm")) == 1 && len(mn.in[mn.onS2].ofType("dm")) == 1
	})
	if m := mn.in[mn.onProxy].ofType("dm")[0]; m.From != mn.onS2.Identifier() || string(m.Data) != `"hi"` || m.World != mn.onProxy.Identifier() {
		t.Errorf("behind the proxy: %+v", m)
	}
	if m := mn.in[mn.onS2].ofType("dm")[0]; m.From != mn.onProxy.Identifier() || string(m.Data) != `"hello"` {
		t.Errorf("across the mesh: %+v", m)
	}
	// A broadcast after them arrives after them: nothing else came.
	mn.onS1.Send(peer.AppMessage{Type: "end"})
	waitFor(t, "the broadcast after", 10*time.Second, func() bool {
		return len(mn.in[mn.onProxy].ofType("end")) == 1 && len(mn.in[mn.onS2].ofType("end")) == 1
	})
	if n := len(mn.in[mn.onS1].ofType("dm")); n != 0 {
		t.Errorf("a bystander received %d direct messages", n)
	}
}

// TestMessagesSenderStamped: a peer cannot send as another world, and a
// message it sends without a sender is stamped with its own.
func TestMessagesSenderStamped(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	victim := dialClient(t, url, "victim")
	in := listen(victim)
	p := wiretest.Dial(t, url, "mallory-AAAAAAAA-AAAAAAAA", wiretest.Options{Features: []string{"messages"}})
	// A message goes to the peers the node knows when it is sent: the
	// victim's Dial returns once the node's metadata reached it, which
	// may be before its own reached the node (on busy cores it was not
	// known yet, and the message never came to it).
	waitFor(t, "mallory's and the victim's metadata", 5*time.Second, func() bool {
		return n.Claimed(p.ID) && n.Claimed(victim.Identifier())
	})
	p.Send("message", map[string]any{"from": victim.Identifier(), "type": "chat", "data": "I am the victim"})
	p.Send("message", map[string]any{"from": "server-AAAAAAAA-AAAAAAAA", "type": "chat", "data": "I am the server"})
	p.Send("message", map[string]any{"type": "chat", "data": "me"})
	waitFor(t, "mallory's own message", 5*time.Second, func() bool { return len(in.ofType("chat")) >= 1 })
	time.Sleep(50 * time.Millisecond)
	got := in.ofType("chat")
	if len(got) != 1 || got[0].From != p.ID || string(got[0].Data) != `"me"` {
		t.Fatalf("the victim received %+v, want only mallory's own message, stamped", got)
	}
	// The victim's message to everyone reaches mallory stamped too.
	victim.Send(peer.AppMessage{Type: "chat", Data: json.RawMessage(`"hi"`)})
	waitFor(t, "mallory hears the victim", 5*time.Second, func() bool { return len(p.AppMessages()) == 1 })
	var m map[string]any
	json.Unmarshal(p.AppMessages()[0], &m)
	if m["from"] != victim.Identifier() || m["type"] != "chat" || m["data"] != "hi" {
		t.Errorf("mallory received %v", m)
	}
}

// TestMessagesBadInput: a malformed message closes its link with 1007 and
// reaches no one.
func TestMessagesBadInput(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"not an object", `"chat"`},
		{"no type", `{"data":1}`},
		{"empty type", `{"type":""}`},
		{"long type", `{"type":"` + strings.Repeat("x", peer.MaxMessageTypeBytes+1) + `"}`},
		{"room and world", `{"type":"x","room":"a","world":"b"}`},
		{"bad at", `{"type":"x","at":[1,2]}`},
		{"deep data", `{"type":"x","data":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
			bystander := dialClient(t, url, "by")
			in := listen(bystander)
			p := wiretest.Dial(t, url, "bad-AAAAAAAA-AAAAAAAA", wiretest.Options{Features: []string{"messages"}})
			time.Sleep(20 * time.Millisecond)
			p.SendRaw([]byte(`["message",` + tc.data + `]`))
			code, _ := p.WaitClosed(5 * time.Second)
			if code != 1007 {
				t.Errorf("closed with %d, want 1007", code)
			}
			time.Sleep(30 * time.Millisecond)
			if got := in.all(); len(got) != 0 {
				t.Errorf("the bystander received %+v", got)
			}
		})
	}
}

// TestMessagesAt: a message with a position reaches only peers whose
// region holds it (and those with none).
func TestMessagesAt(t *testing.T) {
	_, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	sender := dialClient(t, url, "sender")
	near := dialClient(t, url, "near")
	near.SetInterest([]peer.Box{{Min: [3]float64{-10, -10, -10}, Max: [3]float64{10, 10, 10}}})
	everywhere := dialClient(t, url, "all")
	inNear, inAll := listen(near), listen(everywhere)
	time.Sleep(50 * time.Millisecond) // the region reaches the node
	sender.Send(peer.AppMessage{Type: "boom", At: [3]float64{500, 0, 0}, HasAt: true})
	sender.Send(peer.AppMessage{Type: "boom", At: [3]float64{1, 2, 3}, HasAt: true, Data: json.RawMessage(`"close"`)})
	waitFor(t, "both booms everywhere", 5*time.Second, func() bool { return len(inAll.ofType("boom")) == 2 })
	waitFor(t, "the near boom", 5*time.Second, func() bool { return len(inNear.ofType("boom")) >= 1 })
	time.Sleep(30 * time.Millisecond)
	got := inNear.ofType("boom")
	if len(got) != 1 || string(got[0].Data) != `"close"` || got[0].At != [3]float64{1, 2, 3} || !got[0].HasAt {
		t.Errorf("the near client received %+v, want only the close boom", got)
	}
}

// TestMessagesSlowReader: a peer that reads nothing loses messages beyond
// its queue's bound, not its link, and the others receive every one.
func TestMessagesSlowReader(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	sender := dialClient(t, url, "sender")
	fast := listen(dialClient(t, url, "fast"))
	slow := wiretest.Dial(t, url, "slow-AAAAAAAA-AAAAAAAA", wiretest.Options{Features: []string{"messages"}, ReadDelay: time.Second, Forget: true})
	time.Sleep(50 * time.Millisecond)
	data := json.RawMessage(`"` + strings.Repeat("x", 8<<10) + `"`)
	const count = 1200 // 10 MB: beyond the slow peer's 1 MiB, TCP's buffers and its first reads
	for i := 0; i < count; i += 100 {
		for range 100 {
			sender.Send(peer.AppMessage{Type: "blob", Data: data})
		}
		// (The sender's own link has the same bound: it waits for them
		// to go.)
		waitFor(t, "the fast peer received the messages", 20*time.Second, func() bool { return len(fast.ofType("blob")) == i+100 })
	}
	var dropped uint64
	waitFor(t, "messages dropped for the slow peer", 10*time.Second, func() bool {
		dropped = 0
		for _, l := range n.Links() {
			dropped += l.MessagesDropped
		}
		return dropped > 0
	})
	if err := slow.Closed(); err != nil {
		t.Errorf("the slow peer's link failed: %v", err)
	}
}
