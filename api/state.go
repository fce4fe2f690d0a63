package api

import (
	"strings"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

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

// State is what StateHandler serves: the node, its objects and its links.
type State struct {
	Identifier string    `json:"identifier"`
	Role       string    `json:"role"`
	Started    time.Time `json:"started"`
	Now        time.Time `json:"now"`
	Revision   uint64    `json:"revision"`
	// ObjectCount is the number of objects; Objects may hold fewer (limit).
	ObjectCount int              `json:"objectCount"`
	Objects     []ObjectInfo     `json:"objects"`
	Links       []relay.LinkInfo `json:"links"`
	// Bridged are the peers bridges serve: Alloverse and snapshot clients.
	Bridged []relay.BridgedInfo `json:"bridged"`
	Mesh    *relay.MeshStatus   `json:"mesh,omitempty"`
}

// StateOf returns a snapshot of node n with at most limit objects (all if
// limit <= 0) whose id, owner or properties contain filter.
func StateOf(n *relay.Node, limit int, filter string) State {
	now := time.Now()
	objs := n.World().Objects()
	st := State{Identifier: n.Identifier(), Role: n.Role().String(), Started: n.Started(), Now: now,
		Revision: n.World().Revision(), ObjectCount: len(objs), Objects: []ObjectInfo{},
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
