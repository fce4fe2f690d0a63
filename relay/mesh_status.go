package relay

import (
	"bytes"
	"context"
	"log/slog"
	"sort"

	"github.com/solipsism/mesh/ownership"
)

// What the mesh looks like from one node (status, inspection), and the
// memberlist delegate and logger.

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
	m.mu.Lock()
	st := MeshStatus{Name: m.name, Addr: m.Addr(), Joined: m.joined || len(m.opts.Join) == 0}
	if m.joinErr != nil {
		st.Error = m.joinErr.Error()
	}
	for _, mem := range m.members {
		st.Members = append(st.Members, MemberStatus{Name: mem.name, Identifier: mem.meta.ID, URL: mem.meta.URL})
	}
	m.mu.Unlock()
	linked := map[string]bool{}
	m.n.mu.Lock()
	for _, ls := range m.n.hub.order {
		if ls.kind == ownership.Mesh && ls.ready {
			linked[ls.member] = true
		}
	}
	m.n.mu.Unlock()
	for i := range st.Members {
		st.Members[i].Linked = linked[st.Members[i].Name]
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].Name < st.Members[j].Name })
	if st.Members == nil {
		st.Members = []MemberStatus{}
	}
	return st
}

// NodeMeta implements memberlist.Delegate.
func (m *Mesh) NodeMeta(limit int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta
}

// NotifyMsg implements memberlist.Delegate.
func (m *Mesh) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (m *Mesh) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (m *Mesh) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (m *Mesh) MergeRemoteState(buf []byte, join bool) {}

// memberlistLog routes memberlist's "[LEVEL] text" lines into slog.
type memberlistLog struct{ log *slog.Logger }

func (w *memberlistLog) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG] ": slog.LevelDebug, "[INFO] ": slog.LevelInfo, "[WARN] ": slog.LevelWarn, "[ERR] ": slog.LevelError} {
		if i := bytes.Index(line, []byte(prefix)); i >= 0 {
			level, line = l, line[i+len(prefix):]
			break
		}
	}
	w.log.Log(context.Background(), level, string(line), "component", "memberlist")
	return len(p), nil
}

// MeshStatus returns the node's mesh status, or nil when it is not in one.
func (n *Node) MeshStatus() *MeshStatus {
	n.mu.Lock()
	m := n.hub.mesh
	n.mu.Unlock()
	if m == nil {
		return nil
	}
	st := m.Status()
	return &st
}
