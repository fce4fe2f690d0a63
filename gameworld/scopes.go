package gameworld

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/solipsism/mesh/scope"
)

// Scopes are an object's keyed sub-collections (seed 003: a Grid's
// Blocks), each a scope.Scope by name. Every snapshot of the object
// shares them with the world and reads them as they are now, under their
// own lock: a snapshot taken before a change sees that change too, which
// is harmless where it is used (a record that gives a peer the whole
// object carries the scopes' versions, and a peer ignores a delta it
// already holds).
type Scopes struct {
	mu sync.RWMutex
	m  map[string]*scope.Scope
}

// ErrScope is matched (errors.Is) by every refusal of a scope change.
var ErrScope = errors.New("scope change refused")

// Names returns the scopes' names, sorted.
func (s *Scopes) Names() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.m))
	for name := range s.m {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Len returns how many elements scope name holds.
func (s *Scopes) Len(name string) int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sc := s.m[name]; sc != nil {
		return sc.Len()
	}
	return 0
}

// Ver returns the version of scope name (0 if the object has none).
func (s *Scopes) Ver(name string) uint64 {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sc := s.m[name]; sc != nil {
		return sc.Ver()
	}
	return 0
}

// Get returns one element of scope name.
func (s *Scopes) Get(name, id string) (scope.Fields, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sc := s.m[name]; sc != nil {
		return sc.Get(id)
	}
	return nil, false
}

// Has reports whether scope name holds element id.
func (s *Scopes) Has(name, id string) bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc := s.m[name]
	return sc != nil && sc.Has(id)
}

// Snapshots returns every scope whole, as snapshots (scope.Delta with
// Full set) by name; nil if there are none.
func (s *Scopes) Snapshots() map[string]scope.Delta {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.m) == 0 {
		return nil
	}
	out := make(map[string]scope.Delta, len(s.m))
	for name, sc := range s.m {
		out[name] = sc.Snapshot()
	}
	return out
}

// Snapshot returns scope name whole, as a snapshot; false if the object
// has no such scope.
func (s *Scopes) Snapshot(name string) (scope.Delta, bool) {
	if s == nil {
		return scope.Delta{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc := s.m[name]
	if sc == nil {
		return scope.Delta{}, false
	}
	return sc.Snapshot(), true
}

// AppendJSON appends scope name's elements as one JSON object (see
// scope.Scope.AppendJSON), or reports false if the object has no such
// scope.
func (s *Scopes) AppendJSON(dst []byte, name string) ([]byte, bool) {
	if s == nil {
		return dst, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc := s.m[name]
	if sc == nil {
		return dst, false
	}
	return sc.AppendJSON(dst), true
}

// Size returns the bytes of every scope (scope.Scope.Size) and their
// elements' count.
func (s *Scopes) Size() (elements int, bytes int64) {
	if s == nil {
		return 0, 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, sc := range s.m {
		elements += sc.Len()
		bytes += sc.Size()
	}
	return elements, bytes
}

// Size1 returns scope name's elements and bytes (scope.Scope.Size).
func (s *Scopes) Size1(name string) (elements int, bytes int64) {
	if s == nil {
		return 0, 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sc := s.m[name]; sc != nil {
		return sc.Len(), sc.Size()
	}
	return 0, 0
}

// hash is what the scopes add to their object's properties' hash sum
// (ScopeHash of each).
func (s *Scopes) hash() uint64 {
	if s == nil {
		return 0
	}
	var h uint64
	for name, sc := range s.m {
		h += ScopeHash(name, sc.Ver(), sc.Sum())
	}
	return h
}

// ScopeHash is what a scope adds to its object's sum of property hashes
// (see ObjectDigest): the FNV-1a hash of a byte 1, the scope's name, a
// zero byte, its version and the sum of its elements' hashes
// (scope.ElementHash; each number 64 bits big-endian).
func ScopeHash(name string, ver, sum uint64) uint64 {
	h := fnvBytes(fnvOffset, []byte{1})
	h = fnvString(h, name)
	h = fnvBytes(h, []byte{0})
	h = fnvUint64(h, ver)
	return fnvUint64(h, sum)
}

// ChangeDigest is the digest (ObjectDigest) of the object an add or
// transfer describes whole: its properties and its scopes' snapshots.
func ChangeDigest(c Change) uint64 {
	props := c.Properties.Hash()
	for name, d := range c.Scopes {
		props += ScopeHash(name, d.Ver, d.Sum())
	}
	return ObjectDigest(IDHash(c.ID), c.Owner, c.Epoch, props)
}

// check reports whether deltas could be applied to the scopes as they are
// (nil: an object not yet created); the world is locked.
func (s *Scopes) check(deltas map[string]scope.Delta) error {
	for name, d := range deltas {
		var ver uint64
		if s != nil {
			if sc := s.m[name]; sc != nil {
				ver = sc.Ver()
			}
		}
		switch {
		case d.Full || d.Ver == 0:
		case d.Ver <= ver:
			return fmt.Errorf("%w: %w: %s is at version %d, the change is %d", ErrScope, scope.ErrStale, name, ver, d.Ver)
		case d.Base > ver:
			return fmt.Errorf("%w: %w: %s is at version %d, the change is built on %d", ErrScope, scope.ErrGap, name, ver, d.Base)
		}
	}
	return nil
}

// apply applies deltas (checked) and returns what changed; the world is
// locked.
func (s *Scopes) apply(deltas map[string]scope.Delta) (map[string]scope.Delta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[string]scope.Delta
	names := make([]string, 0, len(deltas))
	for name := range deltas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sc := s.m[name]
		if sc == nil {
			sc = scope.New()
			if s.m == nil {
				s.m = map[string]*scope.Scope{}
			}
			s.m[name] = sc
		}
		got, err := sc.Apply(deltas[name])
		if err != nil {
			return out, fmt.Errorf("%w: %s: %w", ErrScope, name, err)
		}
		if !got.Empty() || got.Ver != got.Base {
			if out == nil {
				out = map[string]scope.Delta{}
			}
			out[name] = got
		}
	}
	return out, nil
}
