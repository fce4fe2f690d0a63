package presence

import (
	"slices"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// summary names each change as "add room" / "remove room".
func summary(t *testing.T, changes []gameworld.Change, world string, rooms ...string) []string {
	t.Helper()
	byID := map[string]string{}
	for _, r := range rooms {
		byID[ID(r, world)] = r
	}
	var out []string
	for _, c := range changes {
		room, ok := byID[c.ID]
		if !ok {
			t.Fatalf("a change of %s, which is no presence of %s in %v", c.ID, world, rooms)
		}
		if c.Type == gameworld.Add {
			if c.Owner != "" || string(c.Properties.Value(Prop)) != `"`+world+`"` || string(c.Properties.Value("room")) != `"`+room+`"` {
				t.Fatalf("add %+v", c)
			}
		}
		out = append(out, c.Type.String()+" "+room)
	}
	slices.Sort(out)
	return out
}

func TestTracker(t *testing.T) {
	const w = "client-AAAAAAAA-AAAAAAAA"
	all := []string{"hall", "lobby", "roof"}
	md := func(rooms ...string) peer.Metadata {
		return peer.Metadata{Identifier: w, Rooms: rooms, HasRooms: rooms != nil}
	}
	tr := New("room")
	key := new(int)
	for _, step := range []struct {
		name string
		md   peer.Metadata
		left bool
		want []string
	}{
		{"joins two rooms", md("hall", "lobby"), false, []string{"add hall", "add lobby"}},
		{"the same again: nothing", md("lobby", "hall"), false, nil},
		{"moves from the hall to the roof", md("lobby", "roof"), false, []string{"add roof", "remove hall"}},
		{"says no rooms: all of them, and no presence", peer.Metadata{Identifier: w}, false, []string{"remove lobby", "remove roof"}},
		{"comes back to one", md("hall"), false, []string{"add hall"}},
		{"becomes a proxy: its clients make their own", peer.Metadata{Identifier: w, Rooms: []string{"hall"}, HasRooms: true, Role: "proxy"}, false, []string{"remove hall"}},
		{"back", md("roof"), false, []string{"add roof"}},
		{"leaves", peer.Metadata{}, true, []string{"remove roof"}},
		{"leaves again: nothing", peer.Metadata{}, true, nil},
	} {
		var got []gameworld.Change
		if step.left {
			got = tr.PeerLeft(key)
		} else {
			got = tr.PeerChanged(key, step.md)
		}
		if s := summary(t, got, w, all...); !slices.Equal(s, step.want) {
			t.Errorf("%s: %v, want %v", step.name, s, step.want)
		}
	}
	if len(tr.made) != 0 {
		t.Errorf("the tracker still holds %v after the peer left", tr.made)
	}
}

func TestIDIsTheSameEverywhere(t *testing.T) {
	if ID("hall", "a") != ID("hall", "a") || ID("hall", "a") == ID("hall", "b") || ID("hal", "la") == ID("hall", "a") {
		t.Fatal("ids must be stable and distinct")
	}
}
