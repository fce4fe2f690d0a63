package relay

import (
	"github.com/solipsism/mesh/ownership"
)

// What the mesh looks like from one node (status, inspection).

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

// Status returns the mesh as this node sees it.
func (m *Mesh) Status() MeshStatus {
	joined, err := m.ms.Joined()
	st := MeshStatus{Name: m.ms.Name(), Addr: m.ms.Addr(), Joined: joined, Members: []MemberStatus{}}
	if err != nil {
		st.Error = err.Error()
	}
	linked := map[string]bool{}
	m.n.lock()
	for _, ls := range m.n.hub.order {
		if ls.kind == ownership.Mesh && ls.ready {
			linked[ls.member] = true
		}
	}
	m.n.mu.Unlock()
	for _, mem := range m.ms.Members() {
		st.Members = append(st.Members, MemberStatus{Name: mem.Name, Identifier: mem.ID, URL: mem.URL, Linked: linked[mem.Name]})
	}
	return st
}

// MeshStatus returns the node's mesh status, or nil when it is not in one.
func (n *Node) MeshStatus() *MeshStatus {
	n.lock()
	m := n.hub.mesh
	n.mu.Unlock()
	if m == nil {
		return nil
	}
	st := m.Status()
	return &st
}
