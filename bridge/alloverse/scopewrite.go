package alloverse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/solipsism/mesh/scope"
)

// scopeChanges takes, out of a change_components' components, those that
// are scopes of the entity (a grid's blocks): each value is the scope's
// elements whole, an object of element ids to objects of fields ("remove"
// empties the scope). It returns them as deltas against what the node
// holds, so that the others are sent only the elements that changed, and
// leaves the other components in props.
func (s *Session) scopeChanges(id string, props map[string]json.RawMessage) (map[string]scope.Delta, error) {
	o, ok := s.b.node.World().Get(id)
	if !ok || o.Scopes == nil {
		return nil, nil
	}
	var out map[string]scope.Delta
	for _, name := range o.Scopes.Names() {
		v, ok := props[name]
		if !ok {
			continue
		}
		delete(props, name)
		var want map[string]json.RawMessage
		if !bytes.Equal(v, []byte("null")) {
			if err := json.Unmarshal(v, &want); err != nil {
				return nil, fmt.Errorf("component %s is a scope: its value is an object of elements", name)
			}
		}
		var held map[string]json.RawMessage
		if b, ok := o.Scopes.AppendJSON(nil, name); ok {
			if err := json.Unmarshal(b, &held); err != nil {
				return nil, fmt.Errorf("component %s: %w", name, err)
			}
		}
		d := scope.Delta{}
		for eid, raw := range want {
			var f scope.Fields
			if err := json.Unmarshal(raw, &f); err != nil || f == nil {
				return nil, fmt.Errorf("component %s: element %q is not an object of fields", name, eid)
			}
			if cur, ok := held[eid]; ok && sameFields(cur, f) {
				continue
			}
			if d.Added == nil {
				d.Added = map[string]scope.Fields{}
			}
			d.Added[eid] = f // (whole: the component's value is)
		}
		for eid := range held {
			if _, ok := want[eid]; !ok {
				d.Removed = append(d.Removed, eid)
			}
		}
		if d.Empty() {
			continue
		}
		sort.Strings(d.Removed)
		if out == nil {
			out = map[string]scope.Delta{}
		}
		out[name] = d // ver 0: the node numbers it
	}
	return out, nil
}

// sameFields reports whether an element the node holds (its JSON) has
// exactly fields f.
func sameFields(held json.RawMessage, f scope.Fields) bool {
	var h map[string]json.RawMessage
	if json.Unmarshal(held, &h) != nil || len(h) != len(f) {
		return false
	}
	for k, v := range f {
		var a, b any
		if json.Unmarshal(h[k], &a) != nil || json.Unmarshal(v, &b) != nil {
			return false
		}
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		if !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}
