package gameworld

import (
	"fmt"

	"github.com/solipsism/mesh/scope"
)

// ChangeType is the kind of a change record.
type ChangeType uint8

// The change types of the wire protocol.
const (
	Add ChangeType = iota + 1
	Update
	Remove
	// Transfer gives an object a new owner (our extension, see
	// docs/protocol.md): its Owner and Epoch become the object's, and its
	// Properties, when not nil, replace the object's whole.
	Transfer
)

// String returns the wire name of t.
func (t ChangeType) String() string {
	switch t {
	case Add:
		return "add"
	case Update:
		return "update"
	case Remove:
		return "remove"
	case Transfer:
		return "transfer"
	}
	return fmt.Sprintf("ChangeType(%d)", uint8(t))
}

// ParseChangeType maps a wire name to a ChangeType.
func ParseChangeType(s string) (ChangeType, bool) {
	switch s {
	case "add":
		return Add, true
	case "update":
		return Update, true
	case "remove":
		return Remove, true
	case "transfer":
		return Transfer, true
	}
	return 0, false
}

// Change is one change record as sent on the wire.
type Change struct {
	Type ChangeType
	ID   string
	// Owner is the identifier of the world that owns the object. On an add
	// of a new object it becomes the owner; elsewhere it is informational.
	Owner string
	// Properties are the properties to set; missing ones are left unchanged.
	Properties Properties
	// Scopes are changes of the object's keyed sub-collections, by name
	// (our extension, see Scopes): deltas on an update, snapshots (or
	// deltas from version 0) on an add. Nil for none.
	Scopes map[string]scope.Delta
	// Epoch is the object's ownership epoch: it grows with every transfer,
	// and of two claims to an object the higher epoch wins, ties going to
	// the greater owner identifier (see Beats). Zero on objects never
	// transferred, and from peers that do not know transfers.
	Epoch uint64
	// PrevOwner is, on a Transfer record, the owner before it. It is not
	// sent on the wire.
	PrevOwner string
	// Answer marks a Transfer record that answers a transfer request, as
	// opposed to one that announces a transfer: a node that passed a
	// request on tells its asker when the answer comes back, and a mesh
	// node counts its peers' answers as acknowledgements (docs/protocol.md).
	// Worlds ignore it.
	Answer bool
	// Stated marks a Transfer whose Epoch is the sender's word, even 0 (an
	// upstream telling what an object is), as opposed to a request, whose
	// zero Epoch asks for the next one. It is not sent on the wire: a
	// node sets it on what its upstream and mesh members send.
	Stated bool
	// prep is what World.Prepare worked out for this change ahead of
	// Apply, if anything.
	prep *prepared
}

// Beats reports whether a claim (epoch, owner) to an object wins over the
// object's current (curEpoch, curOwner): a higher epoch wins, and of equal
// epochs the greater owner identifier. A claim of epoch 0 (from a peer that
// knows nothing of transfers) never wins. Every node decides the same way,
// so concurrent transfers end with one owner everywhere.
func Beats(epoch uint64, owner string, curEpoch uint64, curOwner string) bool {
	if epoch == 0 {
		return false
	}
	return epoch > curEpoch || (epoch == curEpoch && owner > curOwner)
}

// Record is a change that a World has applied, normalised: Type is Add only
// when the object was created, Update carries only the properties whose
// values changed, and Owner is always the stored owner.
type Record struct {
	Change
	// Version is the object's version after this record.
	Version uint64
	// Revision is the world revision this record produced.
	Revision uint64
	// After holds all the object's properties after this record (nil for a
	// remove). It shares storage with the world and must not be modified.
	After Properties
	// Slot is the object's slot (see Object.Slot).
	Slot uint32
	// ObjectScopes are the object's scopes, as they are now (nil if it
	// has none): what a peer that takes no scope deltas is sent whole.
	ObjectScopes *Scopes
}

// MergeScopes returns the scope changes a then b, composed per scope
// (scope.Compose). Neither input is modified.
func MergeScopes(a, b map[string]scope.Delta) map[string]scope.Delta {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make(map[string]scope.Delta, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if prev, ok := out[k]; ok {
			v = scope.Compose(prev, v)
		}
		out[k] = v
	}
	return out
}
