package relay

import (
	"encoding/json"
	"errors"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/scope"
)

// Validation. A node with Options.Validator (the operator's property
// schemas, package schema) checks every write that enters it from a peer
// it serves (links and bridges alike, so WebSocket, Alloverse and snapshot
// clients) and its own (Node.Apply): a write that would leave its object
// invalid is refused whole, nothing changed, and the writer is told why
// with a message of type TypeRefused (to peers that take messages). What
// comes from an upstream or a mesh member is not checked again: it
// entered the world at a node that checked it (give every node of a mesh
// the same schemas).

// Validator checks writes against property schemas. Check returns why a
// change would leave its object invalid, or nil; existing is the object
// before the change (nil for a new one). It is called with the node's
// lock held, one call at a time, and must not call the node.
type Validator interface {
	Check(c gameworld.Change, existing *gameworld.Object) error
}

// TypeRefused is the type of the message that tells a writer why a node
// refused its write: data {"id", "reason", "properties"} where properties
// holds, for each property the write set, the node's value (null if it
// has none), or "gone": true if the node has no such object. Clients put
// those values back. Messages of types beginning "solipsism." come only
// from nodes: a peer's are refused.
const TypeRefused = "solipsism.refused"

// reservedType reports whether a message type is one only nodes send.
func reservedType(t string) bool { return len(t) > 10 && t[:10] == "solipsism." }

// ErrInvalidWrite is matched (errors.Is) by the refusal of a write the
// Validator refused; its message is the reason.
var ErrInvalidWrite = errors.New("relay: invalid write")

// invalidWrite is a write the Validator refused.
type invalidWrite struct{ err error }

func (e *invalidWrite) Error() string        { return e.err.Error() }
func (e *invalidWrite) Unwrap() error        { return e.err }
func (e *invalidWrite) Is(target error) bool { return target == ErrInvalidWrite }

// validate applies the Validator to a write from a peer this node serves,
// or its own. n.mu must be held.
func (n *Node) validate(c gameworld.Change, existing *gameworld.Object) error {
	if n.opts.Validator == nil {
		return nil
	}
	if err := n.opts.Validator.Check(c, existing); err != nil {
		n.life.metrics.Limited("schema")
		return &invalidWrite{err}
	}
	return nil
}

type refusedData struct {
	ID         string                     `json:"id"`
	Reason     string                     `json:"reason"`
	Properties map[string]json.RawMessage `json:"properties,omitempty"`
	// Scopes holds, for each scope the write changed, the node's copy as
	// a snapshot (version 0 and empty if it has none): the writer replaces
	// its own with it, version included.
	Scopes map[string]scope.Delta `json:"scopes,omitempty"`
	Gone   bool                   `json:"gone,omitempty"`
}

// tellRefusedLocked tells the writers of refused invalid writes why, and
// what the node holds instead. n.mu must be held.
func (n *Node) tellRefusedLocked(refused []gameworld.Refusal) {
	for _, rf := range refused {
		var iw *invalidWrite
		if !errors.As(rf.Err, &iw) {
			continue
		}
		d := refusedData{ID: rf.Change.ID, Reason: iw.Error()}
		writer := rf.Change.Owner
		if o, ok := n.world.Get(rf.Change.ID); ok {
			writer = o.Owner
			d.Properties = make(map[string]json.RawMessage, rf.Change.Properties.Len())
			for k := range rf.Change.Properties.All() {
				v, ok := o.Properties.Get(k)
				if !ok {
					v = json.RawMessage("null")
				}
				d.Properties[k] = v
			}
			if len(rf.Change.Scopes) > 0 {
				d.Scopes = make(map[string]scope.Delta, len(rf.Change.Scopes))
				for name := range rf.Change.Scopes {
					sn, ok := o.Scopes.Snapshot(name)
					if !ok {
						sn = scope.Delta{Full: true}
					}
					d.Scopes[name] = sn
				}
			}
		} else {
			d.Gone = true
		}
		n.log.Info("refused a write that breaks the property schema", "id", rf.Change.ID, "writer", writer, "reason", d.Reason)
		if writer == "" {
			continue
		}
		data, _ := json.Marshal(d) // plain strings and JSON values
		n.postLocked(peer.AppMessage{From: n.id, Type: TypeRefused, World: writer, Data: data}, nil, n.ownerInfo(n.id))
	}
}

// correctLocked puts back what an upstream refused of a write made here
// or behind this node (a TypeRefused message from the upstream ls): the
// node's values, or the object gone, in this world and, routed as any
// change from the upstream, to the peers it was passed on to. n.mu must
// be held.
func (n *Node) correctLocked(m peer.AppMessage, ls *linkState) {
	var d refusedData
	if json.Unmarshal(m.Data, &d) != nil || d.ID == "" {
		return
	}
	o, ok := n.world.Get(d.ID)
	if !ok || !n.ownerInfo(o.Owner).local {
		return
	}
	cs := []gameworld.Change{{Type: gameworld.Update, ID: d.ID, Properties: gameworld.PropertiesOf(d.Properties), Scopes: d.Scopes}}
	switch {
	case d.Gone:
		cs[0] = gameworld.Change{Type: gameworld.Remove, ID: d.ID}
	case len(d.Properties) == 0 && len(d.Scopes) == 0, ownChanges(cs, n.id) != nil:
		return
	}
	res := n.world.Apply(cs, nil)
	n.route(res.Records, ls)
}
