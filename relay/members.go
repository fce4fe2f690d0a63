package relay

import (
	"errors"
	"net/http"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// The mesh, as the node sees it. Membership and the dialling of mesh links
// are package cluster's; the node serves the links, routes what crosses
// them, and asks its Members when a link drops whether the member is still
// alive.

// MeshNameHeader is the handshake header a mesh link's dialer names itself
// in: a request to /ws that carries it is a mesh link, handed to the node's
// Members.
const MeshNameHeader = "Solipsism-Mesh"

// Members is the mesh a server node is in (package cluster's Mesh).
// Alive and Leaving are called with the node's lock held and must not call
// the node; Accept and Status are called without it.
type Members interface {
	// Alive reports whether member name is still in the mesh: a mesh
	// link that closes while its member is alive keeps the member's
	// objects for the link dialled again.
	Alive(name string) bool
	// Leaving reports whether this node has left the mesh.
	Leaving() bool
	// Accept serves a handshake carrying MeshNameHeader, calling
	// AcceptMesh if it admits the dialer.
	Accept(w http.ResponseWriter, r *http.Request)
	// Status describes the mesh as this node sees it.
	Status() MeshStatus
}

// MeshStatus describes the mesh as one node sees it.
type MeshStatus struct {
	Name    string         `json:"name"`
	Addr    string         `json:"addr"`
	Joined  bool           `json:"joined"`
	Error   string         `json:"error,omitempty"`
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one other member.
type MemberStatus struct {
	Name       string `json:"name"`
	Identifier string `json:"identifier"`
	URL        string `json:"url"`
	Linked     bool   `json:"linked"`
}

// SetMembers makes the node a member of m. Only a server joins a mesh,
// once.
func (n *Node) SetMembers(m Members) error {
	if n.role != ownership.Server {
		return errors.New("relay: only server nodes join a mesh")
	}
	n.lock()
	defer n.mu.Unlock()
	if n.hub.mesh != nil {
		return errors.New("relay: the node is in a mesh already")
	}
	n.hub.mesh = m
	return nil
}

// members returns the node's Members, nil if it is in no mesh.
func (n *Node) members() Members {
	n.lock()
	defer n.mu.Unlock()
	return n.hub.mesh
}

// ServeMesh serves conn, dialled to member at url, as a mesh link until
// it closes.
func (n *Node) ServeMesh(conn peer.Conn, member, url string) error {
	return n.run(n.attach(conn, ownership.Mesh, url, member))
}

// AcceptMesh serves conn, accepted from member, as a mesh link on a
// goroutine of its own.
func (n *Node) AcceptMesh(conn peer.Conn, member string) {
	n.goRun(n.attach(conn, ownership.Mesh, "", member))
}

// MeshLinks returns the members a mesh link is up with.
func (n *Node) MeshLinks() map[string]bool {
	n.lock()
	defer n.mu.Unlock()
	linked := map[string]bool{}
	for _, ls := range n.hub.order {
		if ls.kind == ownership.Mesh && ls.ready {
			linked[ls.member] = true
		}
	}
	return linked
}

// CloseMeshLinks closes every mesh link, telling the members why.
func (n *Node) CloseMeshLinks(reason string) {
	n.lock()
	defer n.mu.Unlock()
	for _, ls := range n.hub.order {
		if ls.kind == ownership.Mesh {
			ls.link.Close(peer.StatusGoingAway, reason)
		}
	}
}

// MeshStatus returns the node's mesh status, or nil when it is not in one.
func (n *Node) MeshStatus() *MeshStatus {
	m := n.members()
	if m == nil {
		return nil
	}
	st := m.Status()
	return &st
}
