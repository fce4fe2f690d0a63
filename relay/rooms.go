package relay

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
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

// wants is what a peer wants to see: boxes of space (all of it unless
// hasBoxes) and rooms (all of them if nil).
type wants struct {
	boxes    []peer.Box
	hasBoxes bool
	rooms    map[string]bool
}

func wantsOf(md peer.Metadata) wants {
	v := wants{boxes: md.Interest, hasBoxes: md.HasInterest}
	if md.HasRooms {
		v.rooms = make(map[string]bool, len(md.Rooms))
		for _, r := range md.Rooms {
			v.rooms[r] = true
		}
	}
	return v
}

func (v wants) everything() bool { return !v.hasBoxes && v.rooms == nil }

func (v wants) region() *region {
	return &region{boxes: v.boxes, hasBoxes: v.hasBoxes, rooms: v.rooms}
}

// same reports whether v is what r (nil: everything) holds.
func (v wants) same(r *region) bool {
	if r == nil {
		return v.everything()
	}
	return v.equal(wants{boxes: r.boxes, hasBoxes: r.hasBoxes, rooms: r.rooms})
}

func (v wants) equal(w wants) bool {
	return v.hasBoxes == w.hasBoxes && interest.SameBoxes(v.boxes, w.boxes) && (v.rooms == nil) == (w.rooms == nil) && maps.Equal(v.rooms, w.rooms)
}

// roomOf reads an object's room: a JSON string in the room property, or
// "" (no room: seen in every room).
func (n *Node) roomOf(props gameworld.Properties) string {
	raw := props.Value(n.opts.RoomProperty)
	if len(raw) < 3 || raw[0] != '"' {
		return ""
	}
	if raw[len(raw)-1] == '"' && !strings.ContainsRune(string(raw[1:len(raw)-1]), '\\') {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// holds reports whether r holds an object with properties props, its
// boxes grown by margin.
func (n *Node) holds(r *region, props gameworld.Properties, margin float64) bool {
	if r.none {
		return false
	}
	if r.rooms != nil {
		if room := n.roomOf(props); room != "" && !r.rooms[room] {
			return false
		}
	}
	if !r.hasBoxes {
		return true
	}
	p, ok := n.positionOf(props)
	return !ok || interest.Contains(r.boxes, p, margin)
}

// visitRooms calls visit with each region of rooms alone that may see an
// object that was at old and is at now (either not In if it was not, or is
// gone). n.mu must be held.
func (n *Node) visitRooms(old, now interest.Place, visit func(*linkState)) {
	sp := &n.sp
	had, has := old.In, now.In
	if (had && old.Room == "") || (has && now.Room == "") {
		for _, ls := range sp.roomOnly {
			visit(ls)
		}
		return
	}
	if had {
		for _, ls := range sp.roomLinks[old.Room] {
			visit(ls)
		}
	}
	if has && (!had || now.Room != old.Room) {
		for _, ls := range sp.roomLinks[now.Room] {
			visit(ls)
		}
	}
}

// inRoom reports whether ls's peer is in room (every peer that announced
// no rooms is in all of them). n.mu must be held.
func (ls *linkState) inRoom(room string) bool {
	return ls.region == nil || ls.region.rooms == nil || ls.region.rooms[room]
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
		if ls.region != nil && ls.region.none {
			return true // wants nothing: no room
		}
		if ls.region == nil || ls.region.rooms == nil {
			return false
		}
		for r := range ls.region.rooms {
			set[r] = true
		}
		return true
	}
	if !n.eachDownstreamLocked(add) || len(set) > peer.MaxRooms {
		return nil, false
	}
	rooms = make([]string, 0, len(set))
	for r := range set {
		rooms = append(rooms, r)
	}
	sort.Strings(rooms)
	return rooms, true
}
