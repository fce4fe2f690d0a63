package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

func dialIn(t *testing.T, url, prefix string, rooms []string, interest []peer.Box) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{Prefix: prefix, Tick: 5 * time.Millisecond, Rooms: rooms, Interest: interest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roomView is what a peer in rooms (nil: all) with a region (nil:
// everywhere) should hold of the world w: its own objects, and the others
// of those rooms or none, inside the region.
func roomView(n *relay.Node, w *gameworld.World, self string, rooms []string, boxes []peer.Box) map[string]string {
	return sideView(n, w, func(owner string) bool { return owner == self }, rooms, boxes)
}

// sideView is roomView for a peer that holds all the objects of the
// owners mine says are its own.
func sideView(n *relay.Node, w *gameworld.World, mine func(string) bool, rooms []string, boxes []peer.Box) map[string]string {
	out := map[string]string{}
	w.Range(func(o gameworld.Object) bool {
		if n != nil && !mine(o.Owner) {
			if room := n.RoomOf(o.Properties); rooms != nil && room != "" && !slices.Contains(rooms, room) {
				return true
			}
			if p, ok := n.PositionOf(o.Properties); boxes != nil && ok && !interest.Contains(boxes, p, 0) {
				return true
			}
		}
		b, _ := json.Marshal(o.Properties)
		out[o.ID] = o.Owner + " " + string(b)
		return true
	})
	return out
}

func worldView(w *gameworld.World) map[string]string {
	return roomView(nil, w, "", nil, nil)
}

// TestRoomsThroughProxyAndMesh: peers in rooms, behind a proxy and on two
// mesh members, each end with exactly their rooms' objects (and those of
// no room), see who is in them, and get only their rooms' messages, while
// objects move between rooms and peers change rooms, on busy cores.
func TestRoomsThroughProxyAndMesh(t *testing.T) {
	stop := wiretest.BusyCores()
	defer stop()
	mesh := startMeshWith(t, 2, cluster.Options{}, relay.Options{Tick: 5 * time.Millisecond})
	s1, s2 := mesh[0], mesh[1]
	proxy, proxyURL := startProxy(t, s1.url, relay.Options{Tick: 5 * time.Millisecond})
	waitFor(t, "the proxy connected", 10*time.Second, func() bool { return upstreamConnected(proxy) })
	red, blue := []string{"red"}, []string{"blue"}
	a := dialIn(t, proxyURL, "a", red, nil)
	b := dialIn(t, s2.url, "b", red, nil)
	c := dialIn(t, s1.url, "c", blue, nil)
	d := dialIn(t, s2.url, "d", nil, nil)
	// e is in red, and sees only near the origin.
	near := []peer.Box{{Min: [3]float64{-10, -10, -10}, Max: [3]float64{10, 10, 10}}}
	e := dialIn(t, proxyURL, "e", red, near)
	watcher := wiretest.Dial(t, s2.url, "w2016-AAAAAAAA-AAAAAAAA", wiretest.Options{})
	rooms := map[*client.Client][]string{a: red, b: red, c: blue, d: nil, e: red}
	boxes := map[*client.Client][]peer.Box{e: near}
	inboxes := map[*client.Client]*inbox{}
	for cl := range rooms {
		inboxes[cl] = listen(cl)
	}
	// Each writes objects in its room, near and far, and one of no room.
	var ids []string
	for cl, rs := range rooms {
		room := "green"
		if rs != nil {
			room = rs[0]
		}
		for i := range 20 {
			id, err := cl.Create(map[string]any{"room": room, "position": []float64{float64(i * 3), 0, 0}, "i": i})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if _, err := cl.Create(map[string]any{"kind": "global"}); err != nil {
			t.Fatal(err)
		}
	}
	// Objects change rooms; a peer changes rooms.
	for i, id := range ids {
		for cl := range rooms {
			if owner, _ := cl.Owner(id); owner == cl.Identifier() && i%4 == 0 {
				cl.Set(id, map[string]any{"room": []string{"red", "blue", "green"}[i%3]})
			}
		}
	}
	c.SetRooms([]string{"red", "blue"})
	rooms[c] = []string{"blue", "red"}
	converged := func() error {
		// s2 has a peer in every room: it holds the whole world; s1 holds
		// the rooms of its side.
		side1 := func(owner string) bool {
			return slices.Contains([]string{s1.node.Identifier(), proxy.Identifier(), a.Identifier(), c.Identifier(), e.Identifier()}, owner)
		}
		if got, want := worldView(s1.node.World()), sideView(s1.node, s2.node.World(), side1, []string{"blue", "red"}, nil); !maps.Equal(got, want) {
			return fmt.Errorf("s1 holds %d objects, want %d", len(got), len(want))
		}
		for cl, rs := range rooms {
			exp := roomView(s1.node, s2.node.World(), cl.Identifier(), rs, boxes[cl])
			if got := worldView(cl.World()); !maps.Equal(got, exp) {
				return fmt.Errorf("%s (rooms %v) holds %d objects, want %d", cl.Identifier(), rs, len(got), len(exp))
			}
		}
		if got := len(watcher.Objects()); got != s2.node.World().Len() {
			return fmt.Errorf("the 2016 watcher holds %d objects, want %d", got, s2.node.World().Len())
		}
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for converged() != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := converged(); err != nil {
		for cl, rs := range rooms {
			exp := roomView(s1.node, s2.node.World(), cl.Identifier(), rs, boxes[cl])
			got := worldView(cl.World())
			for id, v := range exp {
				if got[id] != v {
					t.Logf("%s lacks/differs %s: want %s got %s", cl.Identifier(), id, v, got[id])
				}
			}
			for id, v := range got {
				if _, ok := exp[id]; !ok {
					t.Logf("%s has extra %s: %s", cl.Identifier(), id, v)
				}
			}
		}
		for _, n := range []*relay.Node{s1.node, s2.node, proxy} {
			for _, l := range n.Links() {
				t.Logf("%s: link %s %s rooms %v interest %v", n.Identifier(), l.Kind, l.Identifier, l.Rooms, l.Interest)
			}
		}
		t.Fatal(err)
	}
	// Presence: who is in red, seen from red.
	wantRed := []string{a.Identifier(), b.Identifier(), c.Identifier(), e.Identifier()}
	slices.Sort(wantRed)
	waitFor(t, "presence in red", 10*time.Second, func() bool { return slices.Equal(a.Present("red"), wantRed) })
	if got := d.Present("blue"); !slices.Equal(got, []string{c.Identifier()}) {
		t.Errorf("d (in every room) sees %v in blue, want c alone", got)
	}
	// Messages to a room reach its peers and those in every room.
	b.Send(peer.AppMessage{Type: "shout", Room: "red", Data: json.RawMessage(`1`)})
	c.Send(peer.AppMessage{Type: "shout", Room: "blue", Data: json.RawMessage(`2`)})
	waitFor(t, "the shouts", 10*time.Second, func() bool {
		return len(inboxes[a].ofType("shout")) == 1 && len(inboxes[d].ofType("shout")) == 2 && len(inboxes[c].ofType("shout")) == 1 && len(inboxes[e].ofType("shout")) == 1
	})
	time.Sleep(50 * time.Millisecond)
	for cl, want := range map[*client.Client]string{a: "1", c: "1", e: "1"} {
		if got := inboxes[cl].ofType("shout"); len(got) != 1 || string(got[0].Data) != want {
			t.Errorf("%s received %+v, want only shout %s", cl.Identifier(), got, want)
		}
	}
	// a leaves: its presence goes everywhere.
	a.Close()
	waitFor(t, "a's presence gone", 10*time.Second, func() bool { return !slices.Contains(b.Present("red"), a.Identifier()) })
	delete(rooms, a)
	waitFor(t, "every peer holds its rooms after a left", 30*time.Second, func() bool { return converged() == nil })
	if err := converged(); err != nil {
		t.Fatal(err)
	}
	watcher.CheckClean()
}

// TestRoomsBadInput: malformed rooms close the link with 1007 and change
// nothing.
func TestRoomsBadInput(t *testing.T) {
	for _, rooms := range []any{"red", []any{1}, []any{""}, map[string]any{}} {
		n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
		p := wiretest.Dial(t, url, "bad-AAAAAAAA-AAAAAAAA", wiretest.Options{Extra: map[string]any{"rooms": rooms}})
		if code, _ := p.WaitClosed(5 * time.Second); code != 1007 {
			t.Errorf("rooms %v: closed with %d, want 1007", rooms, code)
		}
		if n.World().Len() != 0 {
			t.Errorf("rooms %v: the world holds %d objects", rooms, n.World().Len())
		}
	}
}
