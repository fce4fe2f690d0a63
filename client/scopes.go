package client

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// Scopes (seed 003's nested deltas): an object may hold keyed
// sub-collections, each a scope of elements with fields of their own (a
// Grid's Blocks). Its owner writes them element by element; every node
// and client relays and keeps only what changed, and a peer that knows no
// scopes is sent each whole as an ordinary property (docs/protocol.md,
// "Scopes").

// SetElements creates elements of scope name of an object this client
// owns, or changes some of their fields (the others are kept): elems maps
// element ids to fields. Each call is one version of the scope; calls
// within a tick reach the others as one delta.
func (c *Client) SetElements(id, name string, elems map[string]map[string]any) error {
	d := scope.Delta{Modified: make(map[string]scope.Fields, len(elems))}
	for eid, fields := range elems {
		f := make(scope.Fields, len(fields))
		for k, v := range fields {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("client: element %s, field %s: %w", eid, k, err)
			}
			f[k] = b
		}
		d.Modified[eid] = f
	}
	return c.apply(gameworld.Change{Type: gameworld.Update, ID: id, Scopes: map[string]scope.Delta{name: d}})
}

// RemoveElements removes elements of scope name of an object this client
// owns.
func (c *Client) RemoveElements(id, name string, elems ...string) error {
	return c.apply(gameworld.Change{Type: gameworld.Update, ID: id, Scopes: map[string]scope.Delta{name: {Removed: elems}}})
}

// Element returns one element of scope name of an object in the client's
// copy of the world.
func (c *Client) Element(id, name, elem string) (scope.Fields, bool) {
	o, ok := c.node.World().Get(id)
	if !ok {
		return nil, false
	}
	return o.Scopes.Get(name, elem)
}

// ElementEvent is one element's change within an Event.
type ElementEvent struct {
	// Scope is the scope's name.
	Scope string
	// Reset, on an event of no element (Kind 0), says that the scope was
	// replaced whole: drop every element of it; the events that follow
	// add what it holds now.
	Reset bool
	scope.Event
}

// Elements calls fn for each element an event changed, scope by scope in
// name order and, within a scope, as the seed applies a delta: removals
// first, then additions, then modifications (each in id order). A scope
// replaced whole (its owner numbered it anew) reports a Reset, then every
// element as added.
func (e Event) Elements(fn func(ElementEvent)) {
	names := make([]string, 0, len(e.Scopes))
	for name := range e.Scopes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d := e.Scopes[name]
		if d.Full {
			fn(ElementEvent{Scope: name, Reset: true})
		}
		for _, id := range d.Removed {
			fn(ElementEvent{Scope: name, Event: scope.Event{Kind: scope.Removed, ID: id}})
		}
		for _, part := range []struct {
			kind scope.EventKind
			m    map[string]scope.Fields
		}{{scope.Added, d.Added}, {scope.Modified, d.Modified}} {
			ids := make([]string, 0, len(part.m))
			for id := range part.m {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				fn(ElementEvent{Scope: name, Event: scope.Event{Kind: part.kind, ID: id, Fields: part.m[id]}})
			}
		}
	}
}
