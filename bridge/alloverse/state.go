package alloverse

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// MaxRevision is the largest revision: the largest integer a double holds
// exactly. The revision after it is 0.
const MaxRevision uint64 = 1 << 53

// revSpace is the number of distinct revisions.
const revSpace = MaxRevision + 1

// nextRevision returns the revision after r.
func nextRevision(r uint64) uint64 {
	if r >= MaxRevision {
		return 0
	}
	return r + 1
}

// revDistance returns how many revisions to is after from, across the wrap.
func revDistance(from, to uint64) uint64 { return (to + revSpace - from) % revSpace }

// isNewer reports whether a is a later revision than b: less than half the
// revision space ahead of it.
func isNewer(a, b uint64) bool {
	d := revDistance(b, a)
	return d != 0 && d < revSpace/2
}

// entity is one entity of the document: its non-null components, and its
// object's scopes (a grid's blocks), each a component whose value is an
// object of elements, kept element by element so that a change of one
// costs that one, in memory and in diffs.
type entity struct {
	comps  map[string]json.RawMessage
	scopes map[string]map[string]json.RawMessage
	// enc caches the entity's encoding in a set; nil when stale.
	enc []byte
	// owner is its object's; pos (if hasPos) and parent what views need
	// of its components (locate).
	owner  string
	pos    [3]float64
	hasPos bool
	parent string
}

// entDelta is what one revision (or the changes pending for the next one)
// did to one entity: whether it existed before, and the value before of
// every component it touched (nil: absent before).
type entDelta struct {
	existed bool
	before  map[string]json.RawMessage
	// elems holds, by scope, the value before of every element touched
	// (nil: absent); scopeNew the scopes the entity did not have before.
	elems    map[string]map[string]json.RawMessage
	scopeNew map[string]bool
}

// delta is the change set that produced revision rev.
type delta struct {
	rev  uint64
	ents map[string]*entDelta
	size int // estimated bytes held
}

// state is the revisioned document with its history. It is not safe for
// concurrent use; Bridge guards it.
type state struct {
	entities map[string]*entity
	rev      uint64
	// hist holds the change sets of the latest revisions, oldest first.
	hist    []*delta
	maxHist int
	pending map[string]*entDelta
	// cache holds this revision's packets: by base revision, and the set.
	// mergeCache holds the merge packets, or nil where merge cannot be
	// exact, for clients that take nothing else.
	cache      map[uint64][]byte
	mergeCache map[uint64][]byte
	set        []byte
	style      PatchStyle
	// views: clients are sent views (Options.ViewRadius), so entities
	// keep their place. For them, per revision: places holds every
	// entity's place (nil: not built yet), since the changes since each
	// base, and vals the merge values of shared changes (view.go).
	views  bool
	places []placed
	since  map[uint64]map[string]*change
	vals   map[*change]mergeVal
	// worldBytes and histBytes estimate the memory the entities and the
	// history hold: history is trimmed to a bound that follows the world
	// (see commit). peak is the most entities held since the map was
	// last rebuilt.
	worldBytes, histBytes int
	peak                  int
}

// Memory estimates: an entity's and a component's overhead besides
// their bytes.
const (
	entityOverhead    = 64
	componentOverhead = 16
	// minHistBytes is history always allowed, however small the world.
	minHistBytes = 256 << 10
)

func compSize(k string, v json.RawMessage) int { return len(k) + len(v) + componentOverhead }

func newState(first uint64, maxHist int, style PatchStyle) *state {
	return &state{entities: map[string]*entity{}, rev: first, maxHist: maxHist,
		pending: map[string]*entDelta{}, cache: map[uint64][]byte{}, mergeCache: map[uint64][]byte{}, style: style}
}

// touch returns the pending delta of id, creating it.
func (s *state) touch(id string, e *entity) *entDelta {
	d := s.pending[id]
	if d == nil {
		d = &entDelta{existed: e != nil, before: map[string]json.RawMessage{}}
		s.pending[id] = d
	}
	return d
}

// apply takes one delivery into the pending changes. An add or update
// carries the object's whole state, so order within a heartbeat is all
// that matters.
func (s *state) apply(dl relay.Delivery) {
	e := s.entities[dl.ID]
	if dl.Type == gameworld.Remove {
		if e == nil {
			return
		}
		d := s.touch(dl.ID, e)
		s.worldBytes -= len(dl.ID) + entityOverhead
		for k, v := range e.comps {
			if _, ok := d.before[k]; !ok {
				d.before[k] = v
			}
			s.worldBytes -= compSize(k, v)
		}
		for name, m := range e.scopes {
			if d.elems == nil {
				d.elems = map[string]map[string]json.RawMessage{}
			}
			before := d.elems[name]
			if before == nil && !d.scopeNew[name] {
				before = map[string]json.RawMessage{}
				d.elems[name] = before
			}
			for k, v := range m {
				if _, seen := before[k]; !seen && before != nil {
					before[k] = v
				}
				s.worldBytes -= compSize(k, v)
			}
		}
		delete(s.entities, dl.ID)
		return
	}
	if dl.After.IsZero() {
		return
	}
	defer s.applyScopes(dl, dl.ID)
	d := s.touch(dl.ID, e)
	if e == nil {
		e = &entity{comps: map[string]json.RawMessage{}}
		s.entities[dl.ID] = e
		s.worldBytes += len(dl.ID) + entityOverhead
		s.peak = max(s.peak, len(s.entities))
	}
	if dl.Owner != "" {
		e.owner = dl.Owner
	}
	if s.views {
		e.locate(dl.After)
	}
	for k, v := range e.comps {
		if nv, ok := dl.After.Get(k); !ok || isNull(nv) {
			if _, seen := d.before[k]; !seen {
				d.before[k] = v
			}
			delete(e.comps, k)
			s.worldBytes -= compSize(k, v)
			e.enc = nil
		}
	}
	for k, v := range dl.After.All() {
		if isNull(v) {
			continue
		}
		old, ok := e.comps[k]
		if ok && bytes.Equal(old, v) {
			continue
		}
		if _, seen := d.before[k]; !seen {
			d.before[k] = old // nil when absent
		}
		if ok {
			s.worldBytes -= compSize(k, old)
		}
		e.comps[k] = v
		s.worldBytes += compSize(k, v)
		e.enc = nil
	}
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// applyScopes takes a delivery's scope deltas into its entity's scopes
// (the entity exists: apply made it).
func (s *state) applyScopes(dl relay.Delivery, id string) {
	if len(dl.Scopes) == 0 {
		return
	}
	e := s.entities[id]
	d := s.touch(id, e)
	if e.scopes == nil {
		e.scopes = map[string]map[string]json.RawMessage{}
	}
	for name, sd := range dl.Scopes {
		m := e.scopes[name]
		if m == nil {
			m = map[string]json.RawMessage{}
			e.scopes[name] = m
			if _, recorded := d.elems[name]; !recorded {
				// (Had the entity held it at the base, and gone within
				// the pending changes, its removal recorded its elements.)
				if d.scopeNew == nil {
					d.scopeNew = map[string]bool{}
				}
				d.scopeNew[name] = true
			}
		}
		if d.elems == nil {
			d.elems = map[string]map[string]json.RawMessage{}
		}
		before := d.elems[name]
		if before == nil {
			before = map[string]json.RawMessage{}
			d.elems[name] = before
		}
		set := func(k string, v json.RawMessage) {
			old, had := m[k]
			if had && bytes.Equal(old, v) {
				return
			}
			if _, seen := before[k]; !seen {
				before[k] = old // nil when absent
			}
			if had {
				s.worldBytes -= compSize(k, old)
			}
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
				s.worldBytes += compSize(k, v)
			}
			e.enc = nil
		}
		if sd.Full {
			for k := range m {
				if _, keep := sd.Added[k]; !keep {
					set(k, nil)
				}
			}
		}
		for _, k := range sd.Removed {
			set(k, nil)
		}
		for k, f := range sd.Added {
			set(k, appendComponents(nil, f))
		}
		for k, f := range sd.Modified {
			cur := map[string]json.RawMessage{}
			if old, ok := m[k]; ok {
				json.Unmarshal(old, &cur) //nolint:errcheck // encoded here
			}
			for fk, fv := range f {
				cur[fk] = fv
			}
			set(k, appendComponents(nil, cur))
		}
	}
}

// commit turns the pending changes into a new revision if any of them
// changed the document; it reports whether it did.
func (s *state) commit() bool {
	for id, d := range s.pending {
		e := s.entities[id]
		switch {
		case !d.existed && e == nil:
			delete(s.pending, id)
		case d.existed && e != nil:
			same := len(d.scopeNew) == 0
			for k, v := range d.before {
				if !bytes.Equal(v, e.comps[k]) {
					same = false
					break
				}
			}
			for name, before := range d.elems {
				for k, v := range before {
					if !same {
						break
					}
					same = bytes.Equal(v, e.scopes[name][k])
				}
			}
			if same {
				delete(s.pending, id)
			}
		}
	}
	if len(s.pending) == 0 {
		return false
	}
	s.newRevision()
	return true
}

// bump makes a new revision of the same document: a client that already
// holds the current one (it was sent it, and has not acknowledged it yet)
// must not be sent it again as if it were new, since allonet takes a
// state equal to its latest for a broken place (an assertion, in builds
// with asserts on). allonet's own place server numbers every heartbeat's
// state afresh.
func (s *state) bump() { s.newRevision() }

// newRevision turns the pending changes (possibly none) into the next
// revision.
func (s *state) newRevision() {
	s.rev = nextRevision(s.rev)
	d := &delta{rev: s.rev, ents: s.pending}
	for id, ed := range d.ents {
		d.size += len(id) + entityOverhead
		for k, v := range ed.before {
			d.size += compSize(k, v)
		}
		for _, m := range ed.elems {
			for k, v := range m {
				d.size += compSize(k, v)
			}
		}
	}
	s.hist = append(s.hist, d)
	s.histBytes += d.size
	// History keeps at most maxHist revisions, and no more memory than
	// twice the world's: a diff from further back would be larger than
	// the set a client gets instead.
	for len(s.hist) > s.maxHist || (len(s.hist) > 0 && s.histBytes > max(2*s.worldBytes, minHistBytes)) {
		s.histBytes -= s.hist[0].size
		s.hist[0] = nil
		s.hist = s.hist[1:]
	}
	if s.peak > 1024 && 4*len(s.entities) < s.peak {
		// Go maps keep their buckets when emptied: after a flood of
		// entities leaves, a fresh map lets their memory go.
		fresh := make(map[string]*entity, len(s.entities))
		for id, e := range s.entities {
			fresh[id] = e
		}
		s.entities, s.peak = fresh, len(fresh)
	}
	s.pending = map[string]*entDelta{}
	clear(s.cache)
	clear(s.mergeCache)
	s.set = nil
	s.places = nil
	clear(s.since)
	clear(s.vals)
}

// forgetHistory lets the history go, and the packets built from it:
// without clients no one holds a revision to be sent a diff from (a
// client that comes is sent a set first), and a bridge without clients
// sleeps, so what a load left in history (up to its bound: megabytes
// after a thousand clients) would stay until a client came.
func (s *state) forgetHistory() {
	if len(s.hist) == 0 {
		return
	}
	clear(s.hist)
	s.hist, s.histBytes = nil, 0
	clear(s.cache)
	clear(s.mergeCache)
}

// inHistory reports whether a diff from base to the current revision can
// be built.
func (s *state) inHistory(base uint64) bool {
	if base == s.rev {
		return true
	}
	d := revDistance(base, s.rev)
	return d <= uint64(len(s.hist)) && s.hist[len(s.hist)-int(d)].rev == nextRevision(base)
}

// packet returns what a client that acknowledged ack is sent, or nil if
// it is up to date. ack 0 always gets a set.
func (s *state) packet(ack uint64) []byte {
	if ack == 0 || !s.inHistory(ack) {
		return s.setPacket()
	}
	if ack == s.rev {
		return nil
	}
	if p, ok := s.cache[ack]; ok {
		return p
	}
	p := s.diffPacket(ack)
	s.cache[ack] = p
	return p
}

// mergePacketFor is packet for a client that reads nothing but merge
// patches and sets (allonet): a set where merge cannot express the diff.
func (s *state) mergePacketFor(ack uint64) []byte {
	if ack == 0 || !s.inHistory(ack) {
		return s.setPacket()
	}
	if ack == s.rev {
		return nil
	}
	p, ok := s.mergeCache[ack]
	if !ok {
		changes := s.changesSince(ack)
		p, _ = s.mergePacket(ack, slices.Sorted(maps.Keys(changes)), changes, s.entity)
		s.mergeCache[ack] = p
	}
	if p == nil {
		return s.setPacket()
	}
	return p
}

// setPacket encodes the whole document as a set, once per revision.
func (s *state) setPacket() []byte {
	if s.set == nil {
		s.set = s.setOf(slices.Sorted(maps.Keys(s.entities)))
	}
	return s.set
}

// setOf encodes a set of the entities ids (sorted; those the document
// lacks left out).
func (s *state) setOf(ids []string) []byte {
	size := 64
	for _, id := range ids {
		if e := s.entities[id]; e != nil {
			if e.enc == nil {
				e.enc = appendEntity(nil, id, e.all())
			}
			size += len(id) + len(e.enc) + 4
		}
	}
	b := make([]byte, 0, size)
	b = append(b, `{"patch_style":"set","entities":{`...)
	n := 0
	for _, id := range ids {
		if e := s.entities[id]; e != nil {
			b = appendMember(b, n > 0, id, e.enc)
			n++
		}
	}
	b = append(b, `},"revision":`...)
	b = strconv.AppendUint(b, s.rev, 10)
	return append(b, '}')
}

// all returns the entity's components, its scopes among them as objects
// of their elements.
func (e *entity) all() map[string]json.RawMessage {
	if len(e.scopes) == 0 {
		return e.comps
	}
	out := make(map[string]json.RawMessage, len(e.comps)+len(e.scopes))
	for k, v := range e.comps {
		out[k] = v
	}
	for name, m := range e.scopes {
		out[name] = appendComponents(nil, m)
	}
	return out
}

// appendEntity appends {"id":id,"components":{...}} with sorted keys.
func appendEntity(b []byte, id string, comps map[string]json.RawMessage) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"components":`...)
	b = appendComponents(b, comps)
	return append(b, '}')
}

func appendComponents(b []byte, comps map[string]json.RawMessage) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(comps)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, comps[k]...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// change is what happened to one entity between a base revision and now.
type change struct {
	existed bool
	// base holds the base value of every component touched since; elems
	// that of every element touched, by scope, and scopeNew the scopes
	// the entity did not have at the base.
	base     map[string]json.RawMessage
	elems    map[string]map[string]json.RawMessage
	scopeNew map[string]bool
}

// changesSince folds the change sets after base into one per entity, in
// time proportional to their size. base must be in history.
func (s *state) changesSince(base uint64) map[string]*change {
	d := int(revDistance(base, s.rev))
	out := map[string]*change{}
	for _, h := range s.hist[len(s.hist)-d:] {
		for id, ed := range h.ents {
			c := out[id]
			if c == nil {
				c = &change{existed: ed.existed, base: map[string]json.RawMessage{}}
				out[id] = c
			}
			for k, v := range ed.before {
				if _, ok := c.base[k]; !ok {
					c.base[k] = v
				}
			}
			for name, m := range ed.elems {
				if c.elems == nil {
					c.elems = map[string]map[string]json.RawMessage{}
				}
				if c.elems[name] == nil {
					c.elems[name] = map[string]json.RawMessage{}
					if ed.scopeNew[name] {
						if c.scopeNew == nil {
							c.scopeNew = map[string]bool{}
						}
						c.scopeNew[name] = true
					}
				}
				for k, v := range m {
					if _, ok := c.elems[name][k]; !ok {
						c.elems[name][k] = v
					}
				}
			}
		}
	}
	return out
}
