package relay

import (
	"slices"
	"sort"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Rooms. A peer may announce the rooms it is in (metadata key "rooms"): it
// is then sent only the objects of those rooms (the property
// Options.RoomProperty, "room", holds an object's room) and of no room,
// and only their messages. Rooms and a spatial region combine: an object
// is seen if it is in one of the rooms and inside the region. A room is
// one more filter of a link's region (interest.go): the same reveals and
// hides when a peer changes rooms or an object changes room, the same
// unions announced upstream and to the mesh. Regions of rooms alone are
// indexed by room, so that a change in one room visits only its peers.

// DefaultRoomProperty is the property holding an object's room.
const DefaultRoomProperty = "room"

// holds reports whether r holds an object with properties props, its
// boxes grown by margin.
func (n *Node) holds(r *region, props gameworld.Properties, margin float64) bool {
	return n.sp.Props.Holds(&r.Region, props, margin)
}

// inRoom reports whether ls's peer is in room (every peer that announced
// no rooms is in all of them). n.mu must be held.
func (ls *linkState) inRoom(room string) bool {
	return ls.region == nil || ls.region.InRoom(room)
}

// inRoomLocked reports whether this node is in room: a client node in
// those it set (SetRooms), any other node in all. n.mu must be held.
func (n *Node) inRoomLocked(room string) bool {
	return n.up.rooms == nil || slices.Contains(n.up.rooms, room)
}

// SetRooms sets the rooms a client node is in (see Client.SetRooms); nil
// means all of them. The upstream is told at once.
func (n *Node) SetRooms(rooms []string) {
	n.lock()
	defer n.mu.Unlock()
	if rooms != nil {
		rooms = slices.Compact(slices.Sorted(slices.Values(rooms)))
	}
	n.up.rooms = rooms
	n.chainChanged()
}

// unionRoomsLocked returns the rooms of the node's downstream peers, for
// its upstream and mesh links: has is false if any of them is in all
// rooms, or they are in too many to list. n.mu must be held.
func (n *Node) unionRoomsLocked() (rooms []string, has bool) {
	set := map[string]bool{}
	add := func(ls *linkState) bool {
		if ls.region != nil && ls.region.None {
			return true // wants nothing: no room
		}
		if ls.region == nil || ls.region.Rooms == nil {
			return false
		}
		for r := range ls.region.Rooms {
			set[r] = true
		}
		return true
	}
	if !n.hub.downstream(add) || len(set) > peer.MaxRooms {
		return nil, false
	}
	rooms = make([]string, 0, len(set))
	for r := range set {
		rooms = append(rooms, r)
	}
	sort.Strings(rooms)
	return rooms, true
}
