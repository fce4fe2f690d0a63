package store

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// Object is a durable object: what a node restores of it.
type Object struct {
	ID         string               `json:"id"`
	Owner      string               `json:"owner"`
	Epoch      uint64               `json:"epoch,omitempty"`
	Properties gameworld.Properties `json:"properties"`
	// Scopes are the object's scopes, whole (snapshots), by name.
	Scopes map[string]scope.Delta `json:"scopes,omitempty"`
}

// State is everything a store holds.
type State struct {
	// Identifier is the node's world identifier; empty in a new store.
	Identifier string
	// ResumeSecret keys the node's resume tokens; nil in a new store.
	ResumeSecret []byte
	// Objects are the durable objects, in no particular order.
	Objects []Object
	// Meta holds named values (a bridge's revision, say).
	Meta map[string][]byte
}

// Batch is one transaction's worth of changes. A zero Batch changes
// nothing.
type Batch struct {
	// Identifier and ResumeSecret, when set, replace the stored ones.
	Identifier   string
	ResumeSecret []byte
	// Put stores objects, replacing any of the same id; Delete removes
	// ids. An id is in at most one of them.
	Put    []Object
	Delete []string
	// Meta sets named values.
	Meta map[string][]byte
}

// Empty reports whether b changes nothing.
func (b *Batch) Empty() bool {
	return b.Identifier == "" && b.ResumeSecret == nil && len(b.Put) == 0 && len(b.Delete) == 0 && len(b.Meta) == 0
}

// Store is a node's durable state. Load is called once, before anything
// is saved; Save applies one batch as one transaction, all or nothing.
// Calls may come from any goroutine, one at a time.
type Store interface {
	Load() (State, error)
	Save(Batch) error
	Close() error
}

// ErrClosed is returned by a closed store.
var ErrClosed = errors.New("store: closed")

// Memory is a Store in memory: a node without a data directory keeps its
// state only while it runs. The zero value is an empty store.
type Memory struct {
	mu      sync.Mutex
	closed  bool
	id      string
	secret  []byte
	objects map[string]Object
	meta    map[string][]byte
}

// Load implements Store.
func (m *Memory) Load() (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return State{}, ErrClosed
	}
	st := State{Identifier: m.id, ResumeSecret: slices.Clone(m.secret), Meta: maps.Clone(m.meta)}
	for _, o := range m.objects {
		st.Objects = append(st.Objects, o)
	}
	return st, nil
}

// Save implements Store.
func (m *Memory) Save(b Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if b.Identifier != "" {
		m.id = b.Identifier
	}
	if b.ResumeSecret != nil {
		m.secret = slices.Clone(b.ResumeSecret)
	}
	if m.objects == nil {
		m.objects = map[string]Object{}
	}
	for _, o := range b.Put {
		m.objects[o.ID] = o
	}
	for _, id := range b.Delete {
		delete(m.objects, id)
	}
	for k, v := range b.Meta {
		if m.meta == nil {
			m.meta = map[string][]byte{}
		}
		m.meta[k] = slices.Clone(v)
	}
	return nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
