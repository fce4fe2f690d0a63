package relay

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/solipsism/mesh/gameworld"
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
}

// RegionBox is one box of an interest region, as the inspector shows it.
type RegionBox struct {
	Min [3]float64 `json:"min"`
	Max [3]float64 `json:"max"`
}

// Links returns a snapshot of the node's links, in the order they opened.
func (n *Node) Links() []LinkInfo {
	n.mu.Lock()
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
		if ls.region != nil && ls.region.rooms != nil {
			info.Rooms = slices.Sorted(maps.Keys(ls.region.rooms))
			if info.Rooms == nil {
				info.Rooms = []string{}
			}
		}
		if ls.region != nil && ls.region.hasBoxes {
			boxes := []RegionBox{}
			for _, b := range ls.region.boxes {
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

// ObjectInfo is a snapshot of one object, for inspection.
type ObjectInfo struct {
	ID         string               `json:"id"`
	Owner      string               `json:"owner"`
	Epoch      uint64               `json:"epoch,omitempty"`
	Properties gameworld.Properties `json:"properties"`
	// Scopes are the object's scopes, by name: their versions and sizes
	// (not their elements, which may be many).
	Scopes  map[string]ScopeInfo `json:"scopes,omitempty"`
	Version uint64               `json:"version"`
	// AgeMs is how long ago the object was created; UpdatedMs how long ago
	// it last changed.
	AgeMs     int64 `json:"ageMs"`
	UpdatedMs int64 `json:"updatedMs"`
}

// ScopeInfo describes one scope of an object, for inspection.
type ScopeInfo struct {
	Ver      uint64 `json:"ver"`
	Elements int    `json:"elements"`
	Bytes    int64  `json:"bytes"`
}

// State is what the inspector endpoint serves.
type State struct {
	Identifier string    `json:"identifier"`
	Role       string    `json:"role"`
	Started    time.Time `json:"started"`
	Now        time.Time `json:"now"`
	Revision   uint64    `json:"revision"`
	// ObjectCount is the number of objects; Objects may hold fewer (limit).
	ObjectCount int          `json:"objectCount"`
	Objects     []ObjectInfo `json:"objects"`
	Links       []LinkInfo   `json:"links"`
	// Bridged are the peers bridges serve: Alloverse and snapshot clients.
	Bridged []BridgedInfo `json:"bridged"`
	Mesh    *MeshStatus   `json:"mesh,omitempty"`
}

// State returns a snapshot of the node with at most limit objects (all if
// limit <= 0) whose id, owner or properties contain filter.
func (n *Node) State(limit int, filter string) State {
	now := time.Now()
	objs := n.world.Objects()
	st := State{Identifier: n.id, Role: n.role.String(), Started: n.life.started, Now: now,
		Revision: n.world.Revision(), ObjectCount: len(objs), Objects: []ObjectInfo{},
		Links: n.Links(), Bridged: n.Bridged(), Mesh: n.MeshStatus()}
	for _, o := range objs {
		if limit > 0 && len(st.Objects) >= limit {
			break
		}
		if filter != "" && !strings.Contains(o.ID, filter) && !strings.Contains(o.Owner, filter) && !propsContain(o.Properties, filter) {
			continue
		}
		info := ObjectInfo{ID: o.ID, Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties, Version: o.Version,
			AgeMs: now.UnixMilli() - o.Created, UpdatedMs: now.UnixMilli() - o.Updated}
		for _, name := range o.Scopes.Names() {
			if info.Scopes == nil {
				info.Scopes = map[string]ScopeInfo{}
			}
			n, b := o.Scopes.Size1(name)
			info.Scopes[name] = ScopeInfo{Ver: o.Scopes.Ver(name), Elements: n, Bytes: b}
		}
		st.Objects = append(st.Objects, info)
	}
	return st
}

func propsContain(p gameworld.Properties, s string) bool {
	for k, v := range p.All() {
		if strings.Contains(k, s) || strings.Contains(string(v), s) {
			return true
		}
	}
	return false
}
