package interest

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Wants is what a viewer wants to see: boxes of space (all of it unless
// HasBoxes) and rooms (all of them if Rooms is nil; an object of no room is
// in every room). The zero value wants everything.
type Wants struct {
	Boxes    []peer.Box
	HasBoxes bool
	Rooms    map[string]bool
}

// WantsOf reads what a peer's metadata says it wants.
func WantsOf(md peer.Metadata) Wants {
	w := Wants{Boxes: md.Interest, HasBoxes: md.HasInterest}
	if md.HasRooms {
		w.Rooms = make(map[string]bool, len(md.Rooms))
		for _, r := range md.Rooms {
			w.Rooms[r] = true
		}
	}
	return w
}

// Everything reports whether w wants all of the world.
func (w Wants) Everything() bool { return !w.HasBoxes && w.Rooms == nil }

// Equal reports whether w and o want the same.
func (w Wants) Equal(o Wants) bool {
	return w.HasBoxes == o.HasBoxes && SameBoxes(w.Boxes, o.Boxes) && (w.Rooms == nil) == (o.Rooms == nil) && maps.Equal(w.Rooms, o.Rooms)
}

// Same reports whether w is what r holds (r nil: everything).
func (w Wants) Same(r *Region) bool {
	if r == nil {
		return w.Everything()
	}
	return w.Equal(r.Wants)
}

// InRoom reports whether w holds objects of room.
func (w Wants) InRoom(room string) bool { return w.Rooms == nil || w.Rooms[room] }

// Region is a viewer's wants as a Space indexes them.
type Region struct {
	Wants
	// None: a region that holds no object at all, placed or not, and is
	// not indexed (an attachment serving no one), so that a node whose
	// only region is an idle one keeps no index.
	None bool
	// cells are the cells registered, unless wide.
	cells []Cell
	// wide: a change of the region looks at the whole world (it covers
	// too many cells, holds all of space, or is None).
	wide bool
}

// Cells returns the cells the region is registered in (none if Wide).
func (r *Region) Cells() []Cell { return r.cells }

// Wide reports whether a change of the region looks at the whole world.
func (r *Region) Wide() bool { return r.wide }

// Spot is where a change leaves an object: its position P if HasP, and
// its room ("" for none).
type Spot struct {
	P    [3]float64
	HasP bool
	Room string
}

// Verdict says whether a viewer with region r is sent a change (not a
// remove) leaving an object at s: Send inside the boxes, Keep within
// margin beyond them (hysteresis: what it holds stays, what it lacks does
// not come), Hide outside them or its rooms.
func (r *Region) Verdict(s *Spot, margin float64) peer.Verdict {
	switch {
	case r.Rooms != nil && s.Room != "" && !r.Rooms[s.Room]:
		return peer.Hide
	case !s.HasP || !r.HasBoxes:
		return peer.Send
	case Contains(r.Boxes, s.P, 0):
		return peer.Send
	case Contains(r.Boxes, s.P, margin):
		return peer.Keep
	}
	return peer.Hide
}

// Props reads what interest needs of an object's properties: its position
// and its room, from the properties named. The zero value reads neither.
type Props struct {
	Position, Room string
}

// PositionOf reads an object's position.
func (pr Props) PositionOf(props gameworld.Properties) ([3]float64, bool) {
	return ParseVec3(props.Value(pr.Position))
}

// RoomOf reads an object's room: a JSON string in the room property, or ""
// (no room: seen in every room).
func (pr Props) RoomOf(props gameworld.Properties) string {
	raw := props.Value(pr.Room)
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

// Holds reports whether r holds an object with properties props, its boxes
// grown by margin.
func (pr Props) Holds(r *Region, props gameworld.Properties, margin float64) bool {
	if r.None {
		return false
	}
	if r.Rooms != nil {
		if room := pr.RoomOf(props); room != "" && !r.Rooms[room] {
			return false
		}
	}
	if !r.HasBoxes {
		return true
	}
	p, ok := pr.PositionOf(props)
	return !ok || Contains(r.Boxes, p, margin)
}
