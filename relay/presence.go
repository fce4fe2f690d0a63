package relay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Presence: who is in a room. The first node a peer reaches (its server,
// or the proxy it connects to) makes, for each room the peer announces, an
// object of that room owned by the node itself: {"room": room,
// "presence": world, "since": ms}. It goes wherever the room's objects go,
// so everyone in the room sees who is there, and goes away when the peer
// leaves the room or its link closes, or with the node if the node goes.
// Peers that relay others (role "proxy": a proxy, a browser's worker)
// make their clients' presence themselves and get none of their own.

// PropPresence is the property naming the world a presence object stands
// for.
const PropPresence = "presence"

// presenceID is the id of the presence object of world in room.
func presenceID(room, world string) string {
	h := sha256.Sum256([]byte(room + "\x00" + world))
	return "presence-" + hex.EncodeToString(h[:12])
}

// presenceLocked makes ls's presence objects match the rooms its peer
// announced in md. n.mu must be held.
func (n *Node) presenceLocked(ls *linkState, md peer.Metadata) {
	var want []string
	if ls.kind == ownership.Downstream && md.HasRooms && md.Role != ownership.Proxy.String() && n.hub.claims[md.Identifier] == ls {
		want = md.Rooms
	}
	keep := make(map[string]string, len(want))
	var changes []gameworld.Change
	for _, room := range want {
		id := presenceID(room, md.Identifier)
		keep[room] = id
		if ls.presence[room] == id {
			continue
		}
		props := gameworld.PropertiesOf(map[string]json.RawMessage{
			n.opts.RoomProperty: jsonString(room),
			PropPresence:        jsonString(md.Identifier),
			"since":             strconv.AppendInt(nil, time.Now().UnixMilli(), 10),
		})
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: id, Owner: n.id, Properties: props})
	}
	for room, id := range ls.presence {
		if keep[room] != id {
			changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: id})
		}
	}
	ls.presence = keep
	n.applyOwnLocked(changes)
}

// presenceGoneLocked removes the presence objects of a link that closed.
// n.mu must be held.
func (n *Node) presenceGoneLocked(ls *linkState) {
	var changes []gameworld.Change
	for _, id := range ls.presence {
		changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: id})
	}
	ls.presence = nil
	n.applyOwnLocked(changes)
}

// applyOwnLocked applies changes to objects of this node's own and routes
// them. n.mu must be held.
func (n *Node) applyOwnLocked(changes []gameworld.Change) {
	if len(changes) == 0 || n.life.closed {
		return
	}
	res := n.world.Apply(changes, func(c gameworld.Change, existing *gameworld.Object) error {
		if existing != nil && existing.Owner != n.id {
			return gameworld.ErrUnknownObject
		}
		return nil
	})
	n.route(res.Records, nil)
}

// jsonString encodes s as a JSON string.
func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}
