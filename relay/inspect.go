package relay

import (
	"maps"
	"slices"
	"time"

	"github.com/solipsism/mesh/ownership"
)

// LinkInfo is a snapshot of one link, for inspection.
type LinkInfo struct {
	ID     uint64 `json:"id"`
	Kind   string `json:"kind"`
	Remote string `json:"remote"`
	// URL is the dialed URL of upstream and mesh links.
	URL string `json:"url,omitempty"`
	// Identifier and Chain are what the peer advertised.
	Identifier string   `json:"identifier"`
	Chain      []string `json:"identifierChain"`
	Role       string   `json:"role,omitempty"`
	// Dialect is the name used for metadata answers on this link.
	Dialect string `json:"dialect"`
	// Interest is the region the peer wants; absent means everything.
	Interest *[]RegionBox `json:"interest,omitempty"`
	// Ready links receive changes.
	Ready bool `json:"ready"`
	// Queued is the number of objects with changes waiting to be sent.
	Queued      int       `json:"queued"`
	IntervalMs  float64   `json:"intervalMs"`
	Since       time.Time `json:"since"`
	MessagesIn  uint64    `json:"messagesIn"`
	MessagesOut uint64    `json:"messagesOut"`
	RecordsIn   uint64    `json:"recordsIn"`
	RecordsOut  uint64    `json:"recordsOut"`
	BytesIn     uint64    `json:"bytesIn"`
	BytesOut    uint64    `json:"bytesOut"`
	Refused     uint64    `json:"refused"`
	Ignored     uint64    `json:"ignored"`
	// MessagesDropped counts ephemeral messages not sent to the peer, too
	// slow to take them.
	MessagesDropped uint64 `json:"messagesDropped"`
	// Rooms are the rooms the peer is in; absent means all of them.
	Rooms []string `json:"rooms,omitempty"`
	// Budget is the bytes per second the link is sent at most (the
	// peer's ask, capped by the node's); Owed the objects whose updates
	// wait (priority.go). Absent when neither applies.
	Budget int `json:"budget,omitempty"`
	Owed   int `json:"owed,omitempty"`
}

// RegionBox is one box of an interest region, as the inspector shows it.
type RegionBox struct {
	Min [3]float64 `json:"min"`
	Max [3]float64 `json:"max"`
}

// Links returns a snapshot of the node's links, in the order they opened.
func (n *Node) Links() []LinkInfo {
	n.lock()
	defer n.mu.Unlock()
	out := make([]LinkInfo, 0, len(n.hub.order))
	for _, ls := range n.hub.order {
		l := ls.link
		md, _ := l.Metadata()
		s := l.Stats()
		info := LinkInfo{
			ID: l.ID(), Kind: ls.kind.String(), Remote: l.RemoteAddr(), URL: ls.remoteURL,
			Identifier: md.Identifier, Chain: md.IdentifierChain, Role: md.Role,
			Dialect: l.Dialect(), Ready: ls.ready, Queued: l.Queued(),
			IntervalMs: float64(l.Interval()) / float64(time.Millisecond), Since: l.Started(),
			RecordsIn: s.RecordsIn.Load(), RecordsOut: s.RecordsOut.Load(),
			BytesIn: s.BytesIn.Load(), BytesOut: s.BytesOut.Load(),
			Refused: s.Refused.Load(), Ignored: s.Ignored.Load(), MessagesDropped: s.MessagesDropped.Load(),
		}
		if ls.kind == ownership.Downstream {
			info.Budget = n.budgetLocked(ls)
		}
		if ls.prio != nil {
			info.Owed = ls.prio.Owing()
		}
		if ls.region != nil && ls.region.Rooms != nil {
			info.Rooms = slices.Sorted(maps.Keys(ls.region.Rooms))
			if info.Rooms == nil {
				info.Rooms = []string{}
			}
		}
		if ls.region != nil && ls.region.HasBoxes {
			boxes := []RegionBox{}
			for _, b := range ls.region.Boxes {
				boxes = append(boxes, RegionBox{Min: b.Min, Max: b.Max})
			}
			info.Interest = &boxes
		}
		for k := range s.MessagesIn {
			info.MessagesIn += s.MessagesIn[k].Load()
			info.MessagesOut += s.MessagesOut[k].Load()
		}
		if info.Chain == nil {
			info.Chain = []string{}
		}
		out = append(out, info)
	}
	return out
}

// Started returns when the node was made.
func (n *Node) Started() time.Time { return n.life.started }
