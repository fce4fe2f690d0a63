package alloverse

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

// Views. With Options.ViewRadius, an announced client is sent only the
// entities near its avatar: the document as it holds it is the bridge's
// document less the entities out of its view. Diffs are built per client,
// from what it held at the revision it acknowledged (remembered for the
// revisions it was sent): an entity that comes into view is added whole,
// one that leaves is removed, as if created and deleted, and the others
// change as in everyone's diff. Revisions stay the document's, so a
// client whose view did not change still follows them.

// locate caches what a view needs of an entity, from its object's
// properties: where it is, from its "position" ([x, y, z], as the node's
// interest reads it) or its "transform" ({"matrix": [16 numbers]}, the
// translation in 12–14, as allonet lays it out), and its parent.
func (e *entity) locate(props gameworld.Properties) {
	e.hasPos = false
	if raw, ok := props.Get("position"); ok {
		e.pos, e.hasPos = interest.ParseVec3(raw)
	} else if raw, ok := props.Get("transform"); ok {
		var t struct {
			Matrix []float64 `json:"matrix"`
		}
		if json.Unmarshal(raw, &t) == nil && len(t.Matrix) == 16 {
			e.pos, e.hasPos = [3]float64{t.Matrix[12], t.Matrix[13], t.Matrix[14]}, true
		}
	}
	e.parent = parentOf(props)
}

// root returns the entity whose place decides id's: its topmost ancestor
// (a child's transform is relative to its parent's), within
// maxSpawnDepth steps.
func (s *state) root(id string) *entity {
	e := s.entities[id]
	for range maxSpawnDepth {
		if e == nil || e.parent == "" {
			break
		}
		p := s.entities[e.parent]
		if p == nil {
			break
		}
		e = p
	}
	return e
}

// view is what a client with a view was sent: the entities of its view
// at each revision it was sent, since the one it acknowledged. Guarded by
// Bridge.mu.
type view struct {
	held map[uint64]map[string]bool
}

// maxViewRevisions bounds the revisions a view remembers: a client that
// acknowledges none of as many is sent a set. Revisions whose view did not
// change share one set (visible), so a client holds about one view's
// worth however many revisions it has not acknowledged.
const maxViewRevisions = 16

// placed is where an entity is, for views: its root's place, its owner
// and its root's.
type placed struct {
	id               string
	pos              [3]float64
	hasPos           bool
	owner, rootOwner string
}

// placesNow returns every entity's place at this revision, built once
// per revision for all the clients.
func (s *state) placesNow() []placed {
	if s.places != nil {
		return s.places
	}
	s.places = make([]placed, 0, len(s.entities))
	for id, e := range s.entities {
		r := s.root(id)
		s.places = append(s.places, placed{id: id, pos: r.pos, hasPos: r.hasPos, owner: e.owner, rootOwner: r.owner})
	}
	return s.places
}

// visible returns the entities agent's client is to hold now: its own,
// those without a place, and those whose root is within radius of its
// avatar on every axis (radius plus margin for those it holds, held);
// every entity while its avatar has no place.
func (s *state) visible(agent, avatar string, radius, margin float64, held map[string]bool) map[string]bool {
	c := s.root(avatar)
	var box peer.Box
	if c != nil {
		for i := range 3 {
			box.Min[i], box.Max[i] = c.pos[i]-radius, c.pos[i]+radius
		}
	}
	out := make(map[string]bool, len(held)+8)
	for _, p := range s.placesNow() {
		m := 0.0
		if held[p.id] {
			m = margin
		}
		if c == nil || !c.hasPos || p.owner == agent || p.rootOwner == agent || !p.hasPos || box.Contains(p.pos, m) {
			out[p.id] = true
		}
	}
	if len(out) == len(held) {
		same := true
		for id := range out {
			if !held[id] {
				same = false
				break
			}
		}
		if same {
			return held // revisions of one view share its set
		}
	}
	return out
}

// sinceShared is changesSince, built once per revision and base for all
// the clients; callers must not change it.
func (s *state) sinceShared(base uint64) map[string]*change {
	if s.since == nil {
		s.since, s.vals = map[uint64]map[string]*change{}, map[*change]mergeVal{}
	}
	c, ok := s.since[base]
	if !ok {
		c = s.changesSince(base)
		s.since[base] = c
	}
	return c
}

// viewPacket returns what a client with view v is sent, now holding the
// entities of now (visible), having acknowledged ack: a diff from what it
// held at ack, or a set of its view; nil if it is up to date. mergeOnly
// clients get a set where merge cannot say it. It notes what the client
// will hold at this revision.
func (s *state) viewPacket(v *view, now map[string]bool, ack uint64, mergeOnly bool) []byte {
	if v.held == nil {
		v.held = map[uint64]map[string]bool{}
	}
	for r := range v.held {
		if r != ack && !isNewer(r, ack) {
			delete(v.held, r) // acknowledged past
		}
	}
	if len(v.held) >= maxViewRevisions {
		clear(v.held)
	}
	base, ok := v.held[ack]
	v.held[s.rev] = now
	if ack == 0 || !ok || !s.inHistory(ack) {
		return s.viewSet(now)
	}
	if ack == s.rev {
		return nil
	}
	shared := s.sinceShared(ack)
	changes := make(map[string]*change, len(shared))
	ids := make([]string, 0, len(shared))
	for id, c := range shared {
		switch {
		case now[id] && base[id]:
			changes[id] = c
		case now[id]:
			changes[id] = &change{existed: false} // into view: whole
		case base[id]:
			changes[id] = &change{existed: true} // out of view: removed
		default:
			continue
		}
		ids = append(ids, id)
	}
	for id := range now {
		if !base[id] && changes[id] == nil {
			changes[id] = &change{existed: false}
			ids = append(ids, id)
		}
	}
	for id := range base {
		if !now[id] && changes[id] == nil {
			changes[id] = &change{existed: true}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	lookup := func(id string) *entity {
		if !now[id] {
			return nil
		}
		return s.entities[id]
	}
	if p := s.diffOf(ack, ids, changes, lookup, mergeOnly); p != nil {
		return p
	}
	return s.viewSet(now)
}

// viewSet is a set of the entities of now.
func (s *state) viewSet(now map[string]bool) []byte {
	return s.setOf(slices.Sorted(maps.Keys(now)))
}
