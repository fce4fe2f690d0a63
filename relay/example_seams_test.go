package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// serve runs n behind a real HTTP server on 127.0.0.1 and returns its
// ws:// URL and a function that stops both.
func serve(n *relay.Node) (url string, stop func()) {
	srv := httptest.NewServer(n)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), func() {
		srv.Close()
		n.Close(context.Background())
	}
}

// until polls cond every 10 ms for up to 10 s.
func until(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// A backend tells everyone something through the node (ephemeral
// messages: nothing is kept). The node stamps it as its own.
func ExampleNode_Publish() {
	node, _ := relay.New(relay.Options{})
	url, stop := serve(node)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice"})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	got := make(chan peer.AppMessage, 1)
	alice.SubscribeMessages(func(m peer.AppMessage) { got <- m })
	// A message goes to the peers the node knows now: wait until it
	// knows alice.
	until(func() bool {
		for _, l := range node.Links() {
			if l.Identifier == alice.Identifier() && l.Ready {
				return true
			}
		}
		return false
	})
	node.Publish(peer.AppMessage{Type: "notice", Data: json.RawMessage(`"doors close at ten"`)})
	m := <-got
	fmt.Println(m.Type, string(m.Data), "from the node:", m.From == node.Identifier())
	// Output: notice "doors close at ten" from the node: true
}

// deliveries is a Receiver that hands what it is routed to a channel: it
// is called with the node's lock held, so it only queues.
type deliveries chan relay.Delivery

func (d deliveries) Receive(ds []relay.Delivery) {
	for _, x := range ds {
		select {
		case d <- x:
		default: // a real bridge would note that it fell behind
		}
	}
}

// An attachment is a peer inside the process (a bridge to another
// protocol): it is routed changes by the same rules as a link, and writes
// through the same checks.
func ExampleNode_Attach() {
	node, _ := relay.New(relay.Options{})
	url, stop := serve(node)
	defer stop()
	got := make(deliveries, 16)
	bridge, err := node.Attach(relay.AttachOptions{Identifier: "bridge-AAAAAAAA-AAAAAAAA", Receiver: got})
	if err != nil {
		panic(err)
	}
	defer bridge.Detach()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice"})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	ball, _ := alice.Create(map[string]any{"kind": "ball"})
	for d := range got {
		if d.ID == ball && d.Type == gameworld.Add {
			fmt.Println("the bridge is given alice's", string(d.After.Value("kind")))
			break
		}
	}
	// The bridge's own objects reach the clients like anyone's.
	bridge.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "portal-1", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"kind": json.RawMessage(`"portal"`)})}})
	seen := until(func() bool {
		o, ok := alice.World().Get("portal-1")
		return ok && o.Owner == "bridge-AAAAAAAA-AAAAAAAA"
	})
	fmt.Println("alice sees the bridge's portal:", seen)
	// Output:
	// the bridge is given alice's "ball"
	// alice sees the bridge's portal: true
}

// visitors is a PeerWatcher: it keeps one object of the node's own, the
// number of peers connected, as presence keeps one per peer and room. It
// is called with the node's lock held, so it only counts.
type visitors struct{ peers map[any]bool }

func (v *visitors) count() []gameworld.Change {
	props := gameworld.PropertiesOf(map[string]json.RawMessage{"kind": json.RawMessage(`"counter"`), "visitors": json.RawMessage(strconv.Itoa(len(v.peers)))})
	return []gameworld.Change{{Type: gameworld.Add, ID: "visitors", Properties: props}}
}

func (v *visitors) PeerChanged(key any, _ peer.Metadata) []gameworld.Change {
	if v.peers[key] {
		return nil // the same peer, new metadata
	}
	v.peers[key] = true
	return v.count()
}

func (v *visitors) PeerLeft(key any) []gameworld.Change {
	if !v.peers[key] {
		return nil
	}
	delete(v.peers, key)
	return v.count()
}

// A capability that follows the node's peers (peer events): each peer
// that arrives or leaves changes an object of the node's, which every peer
// sees like any other.
func ExamplePeerWatcher() {
	node, _ := relay.New(relay.Options{PeerWatchers: []relay.PeerWatcher{&visitors{peers: map[any]bool{}}}})
	url, stop := serve(node)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice"})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	bob, err := client.Dial(ctx, url, client.Options{Prefix: "bob"})
	if err != nil {
		panic(err)
	}
	seen := func(n string) bool {
		return until(func() bool {
			o, ok := alice.World().Get("visitors")
			return ok && string(o.Properties.Value("visitors")) == n
		})
	}
	fmt.Println("alice sees two visitors:", seen("2"))
	bob.Close()
	fmt.Println("then one:", seen("1"))
	// Output:
	// alice sees two visitors: true
	// then one: true
}

// Rooms split one world: a peer that announces rooms is sent only the
// objects of those rooms (an object's "room" property) and of no room,
// and only their messages.
func ExampleNode_rooms() {
	node, _ := relay.New(relay.Options{})
	url, stop := serve(node)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice", Rooms: []string{"lobby"}})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	bob, err := client.Dial(ctx, url, client.Options{Prefix: "bob"}) // in every room
	if err != nil {
		panic(err)
	}
	defer bob.Close()
	bob.Create(map[string]any{"kind": "chair", "room": "lobby"})
	bob.Create(map[string]any{"kind": "piano", "room": "stage"})
	bob.Create(map[string]any{"kind": "sign"})
	// One owner's changes arrive in the order made: once alice has the
	// sign, she would have had the piano before it.
	kinds := func() []string {
		var out []string
		alice.World().Range(func(o gameworld.Object) bool {
			var k string
			if json.Unmarshal(o.Properties.Value("kind"), &k) == nil {
				out = append(out, k)
			}
			return true
		})
		slices.Sort(out)
		return out
	}
	until(func() bool { return slices.Contains(kinds(), "sign") })
	fmt.Println("alice, in the lobby, sees:", kinds())
	// Output: alice, in the lobby, sees: [chair sign]
}
