package presence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Prop is the property naming the world a presence object stands for.
const Prop = "presence"

// ID is the id of the presence object of world in room: the same on every
// node, so that two nodes never make two for one peer.
func ID(room, world string) string {
	h := sha256.Sum256([]byte(room + "\x00" + world))
	return "presence-" + hex.EncodeToString(h[:12])
}

// Tracker makes and removes presence objects. Its zero value is not
// usable: make one with New.
type Tracker struct {
	roomProp string
	// made holds, by peer, the presence objects made for it, by room.
	made map[any]map[string]string
}

// New returns a Tracker whose objects name their room in roomProp.
func New(roomProp string) *Tracker {
	return &Tracker{roomProp: roomProp, made: map[any]map[string]string{}}
}

// PeerChanged takes a downstream peer's metadata, as it arrives or
// changes, and returns the adds and removes that make the peer's presence
// objects match the rooms it announced. A peer that relays others (role
// "proxy": a proxy, a browser's worker) gets none: it makes its clients'
// itself. Adds carry no owner: the node's.
func (t *Tracker) PeerChanged(key any, md peer.Metadata) []gameworld.Change {
	var want []string
	if md.HasRooms && md.Role != "proxy" {
		want = md.Rooms
	}
	had := t.made[key]
	keep := make(map[string]string, len(want))
	var changes []gameworld.Change
	for _, room := range want {
		id := ID(room, md.Identifier)
		keep[room] = id
		if had[room] == id {
			continue
		}
		props := gameworld.PropertiesOf(map[string]json.RawMessage{
			t.roomProp: jsonString(room),
			Prop:       jsonString(md.Identifier),
			"since":    strconv.AppendInt(nil, time.Now().UnixMilli(), 10),
		})
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: id, Properties: props})
	}
	for room, id := range had {
		if keep[room] != id {
			changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: id})
		}
	}
	if len(keep) == 0 {
		delete(t.made, key)
	} else {
		t.made[key] = keep
	}
	return changes
}

// PeerLeft returns the removes of a peer's presence objects: its link
// closed, or it is no longer the one that speaks for its world.
func (t *Tracker) PeerLeft(key any) []gameworld.Change {
	var changes []gameworld.Change
	for _, id := range t.made[key] {
		changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: id})
	}
	delete(t.made, key)
	return changes
}

// jsonString encodes s as a JSON string.
func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}
