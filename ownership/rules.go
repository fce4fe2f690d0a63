package ownership

import (
	"errors"
	"fmt"
)

// Role is what a node does with the objects it learns about.
type Role uint8

// Roles of the wire protocol.
const (
	Client Role = iota + 1
	Proxy
	Server
)

// String returns the role's name as used in flags and metadata.
func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Proxy:
		return "proxy"
	case Server:
		return "server"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole parses a role name.
func ParseRole(s string) (Role, error) {
	switch s {
	case "client":
		return Client, nil
	case "proxy":
		return Proxy, nil
	case "server":
		return Server, nil
	}
	return 0, fmt.Errorf("unknown role %q (want client, proxy or server)", s)
}

// LinkKind is where a link leads, seen from this node.
type LinkKind uint8

// Link kinds.
const (
	// Downstream links lead to worlds this node serves (its clients).
	Downstream LinkKind = iota + 1
	// Upstream links lead toward the server.
	Upstream
	// Mesh links join server nodes.
	Mesh
)

// String returns the kind's name.
func (k LinkKind) String() string {
	switch k {
	case Downstream:
		return "downstream"
	case Upstream:
		return "upstream"
	case Mesh:
		return "mesh"
	}
	return fmt.Sprintf("LinkKind(%d)", uint8(k))
}

// Owner describes an object's owner relative to one link.
type Owner struct {
	// InLinkChain: the owner is in the identifierChain the link's peer
	// advertised (the peer or a world behind it owns the object).
	InLinkChain bool
	// Local: the owner is this node or a world behind one of its downstream
	// links.
	Local bool
}

// MaySend reports whether a node of the given role sends a change to an
// object with owner o over a link of the given kind.
//
//   - Client, upstream: only objects I own (local).
//   - Proxy, upstream: only objects owned by me or by what is behind me.
//   - Proxy or server, downstream: everything not owned by that link's chain
//     (no echo).
//   - Server, mesh: only objects owned by me or my downstream links (split
//     horizon: nothing learned from one mesh peer goes to another).
//
// Combinations a role does not have (a client's downstream link, a proxy's
// mesh link, a server's upstream link) send nothing.
func MaySend(role Role, kind LinkKind, o Owner) bool {
	switch {
	case kind == Upstream && (role == Client || role == Proxy):
		return o.Local && !o.InLinkChain
	case kind == Downstream && (role == Proxy || role == Server):
		return !o.InLinkChain
	case kind == Mesh && role == Server:
		return o.Local && !o.InLinkChain
	}
	return false
}

// Errors returned by MayAccept.
var (
	ErrNotOwner       = errors.New("object owner is not in the link's identifierChain")
	ErrLocalObject    = errors.New("object is owned by this node or a world behind it")
	ErrUnexpectedLink = errors.New("this role accepts no changes over this kind of link")
)

// MayAccept reports whether a change to an object with owner o, arriving
// over a link of the given kind, may be applied. For an update or remove, o
// must describe the stored owner, not the one the record claims.
//
//   - Downstream and mesh: only objects owned by the link's chain. A client
//     cannot write another client's object, even through a proxy.
//   - Upstream: anything except local objects; the upstream relays the rest of
//     the world but never overrides what this node or its clients own.
func MayAccept(role Role, kind LinkKind, o Owner) error {
	switch {
	case kind == Downstream && (role == Proxy || role == Server),
		kind == Mesh && role == Server:
		if !o.InLinkChain {
			return ErrNotOwner
		}
		return nil
	case kind == Upstream && (role == Client || role == Proxy):
		if o.Local {
			return ErrLocalObject
		}
		return nil
	}
	return ErrUnexpectedLink
}
