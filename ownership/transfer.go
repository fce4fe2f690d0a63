package ownership

import (
	"errors"
	"fmt"
)

// Policy says which objects may change owner. Objects carry two reserved
// properties: "transferable" (true or false) and "persistent" (true: the
// object outlives its owner's departure, falling to the node that holds
// it). Every node of a mesh must run the same policy, so that every node
// grants and refuses alike.
type Policy uint8

const (
	// TransferMarked, the default, lets objects marked "transferable":
	// true, and persistent objects not marked "transferable": false,
	// change owner.
	TransferMarked Policy = iota
	// TransferAll lets every object change owner unless it is marked
	// "transferable": false.
	TransferAll
	// TransferNone lets no object change owner by request; persistent
	// objects still fall to the node when their owner leaves.
	TransferNone
)

// String returns the policy's flag name.
func (p Policy) String() string {
	switch p {
	case TransferMarked:
		return "marked"
	case TransferAll:
		return "all"
	case TransferNone:
		return "none"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy maps a flag value to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "marked", "":
		return TransferMarked, nil
	case "all":
		return TransferAll, nil
	case "none":
		return TransferNone, nil
	}
	return 0, fmt.Errorf("ownership: unknown transfer policy %q (want marked, all or none)", s)
}

// Flags are an object's ownership markings, read from its reserved
// properties.
type Flags struct {
	// Transferable is the "transferable" property; Marked says whether
	// the object has it at all.
	Transferable, Marked bool
	// Persistent is the "persistent" property.
	Persistent bool
}

// Allows reports whether an object with flags f may change owner on
// request.
func (p Policy) Allows(f Flags) bool {
	switch p {
	case TransferAll:
		return !f.Marked || f.Transferable
	case TransferMarked:
		return f.Transferable || (f.Persistent && !f.Marked)
	}
	return false
}

// Errors returned for transfers.
var (
	ErrNotTransferable = errors.New("object may not change owner under this node's transfer policy")
	ErrStaleClaim      = errors.New("ownership claim does not beat the object's current owner and epoch")
	ErrAlreadyOwner    = errors.New("the requester already owns the object")
)

// MayClaim reports whether a transfer of an object to newOwner, arriving
// over a link of the given kind, may be taken: the link must speak for the
// new owner.
//
//   - Downstream and mesh: the new owner is in the link's chain (a peer
//     claims objects for itself or a world behind it, never for others).
//   - Upstream: always. The upstream decides for everything below it: it
//     grants and refuses requests, and what it says last stands, even
//     over a grant this node made on its own.
//
// Over downstream and mesh links, whether the claim beats the object's
// current owner is decided by the epochs (gameworld.Beats), and whether
// the object may change owner at all by the Policy.
func MayClaim(role Role, kind LinkKind, newOwner Owner) error {
	switch {
	case kind == Downstream && (role == Proxy || role == Server),
		kind == Mesh && role == Server:
		if !newOwner.InLinkChain {
			return ErrNotOwner
		}
		return nil
	case kind == Upstream && (role == Client || role == Proxy):
		return nil
	}
	return ErrUnexpectedLink
}
