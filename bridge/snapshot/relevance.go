package snapshot

import (
	"encoding/json"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

// Relevancy and importance. A client of version 3 says what it wants in
// its commands (Interest): the ghosts of objects inside its region and of
// its rooms, and its own. A ghost that stops being relevant is despawned
// for that client alone, as a removed one is for everyone; one that
// becomes relevant again spawns afresh, with its values as they are. A
// ghost held stays relevant within Options.InterestMargin of the region,
// so that one on its edge does not come and go. With Options.Near, the
// ghosts near a client's region come first when a packet cannot hold
// every change (MaxKbps, MaxPacket): each doubling of the distance beyond
// Near halves a ghost's importance, over four bands.

// Object properties that place a ghost, as the node's interest and rooms
// read them.
const (
	PositionProperty = "position"
	RoomProperty     = "room"
)

// relevance is a client's interest as the server applies it.
type relevance struct {
	seq   uint32
	boxes []peer.Box
	rooms map[string]bool // nil: every room
}

// setInterestLocked takes in if it is newer than the client's current
// interest. s.mu must be held.
func (c *conn) setInterestLocked(in *interestOf) {
	if c.rel != nil && int32(in.Seq-c.rel.seq) <= 0 {
		return // repeated, or older
	}
	r := &relevance{seq: in.Seq, boxes: in.Boxes}
	if len(in.Rooms) > 0 {
		r.rooms = make(map[string]bool, len(in.Rooms))
		for _, room := range in.Rooms {
			r.rooms[room] = true
		}
	}
	c.rel = r
}

// place records where an object is, from its properties.
func (g *ghost) place(owner string, props gameworld.Properties) {
	if owner != "" {
		g.owner = owner
	}
	g.pos, g.hasPos = [3]float64{}, false
	if raw, ok := props.Get(PositionProperty); ok {
		g.pos, g.hasPos = interest.ParseVec3(raw)
	}
	g.room = ""
	if raw, ok := props.Get(RoomProperty); ok {
		json.Unmarshal(raw, &g.room) // a room is a string; anything else is none
	}
}

// relevantLocked reports whether c is to hold g; held says it does (or a
// send of it is on its way). s.mu must be held.
func (s *Server) relevantLocked(c *conn, g *ghost, held bool) bool {
	r := c.rel
	if r == nil || (c.agent != nil && g.owner == c.identifier) {
		return true
	}
	if r.rooms != nil && g.room != "" && !r.rooms[g.room] {
		return false
	}
	if len(r.boxes) == 0 || !g.hasPos {
		return true
	}
	margin := 0.0
	if held {
		margin = s.opts.InterestMargin
	}
	return interest.Contains(r.boxes, g.pos, margin)
}

// importanceBands is how many bands of distance Options.Near makes.
const importanceBands = 4

// closeness scales a ghost's urgency for c by its distance from the
// centre of the nearest of c's boxes (interest.Band): 8 within Near, then
// 4, 2 and 1 with each doubling; 8 for a ghost without a position, and 1
// for every ghost when distance does not count (no Near, or a client
// without a region). s.mu must be held.
func (s *Server) closeness(c *conn, g *ghost) uint64 {
	const top = 1 << (importanceBands - 1)
	if s.opts.Near <= 0 || c.rel == nil || len(c.rel.boxes) == 0 {
		return 1
	}
	if !g.hasPos {
		return top
	}
	return top >> interest.Band(g.pos, c.rel.boxes, s.opts.Near, importanceBands)
}
