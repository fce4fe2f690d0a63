package relay

import (
	"fmt"
	"sync"

	"github.com/solipsism/mesh/ownership"
)

// upstreamState is what RunUpstream knows of its upstream, for readiness
// and for logging each change of state once.
type upstreamState struct {
	mu      sync.Mutex
	wanted  bool   // RunUpstream runs
	up      bool   // a link is connected
	lastErr string // why the last attempt or link failed
	warned  bool   // the current outage has been logged
}

// upstreamFailed records a failed attempt or a lost link, and logs it at
// WARN once per outage, with its cause.
func (n *Node) upstreamFailed(url string, err error) {
	s := &n.up.status
	s.mu.Lock()
	s.up = false
	if err != nil {
		s.lastErr = err.Error()
	}
	warn := !s.warned
	s.warned = true
	s.mu.Unlock()
	if warn {
		n.log.Warn("upstream unreachable; retrying with backoff", "url", url, "err", err)
	}
}

// upstreamConnected records a connected upstream link.
func (n *Node) upstreamConnected(url string) {
	s := &n.up.status
	s.mu.Lock()
	wasDown := s.warned
	s.up, s.warned, s.lastErr = true, false, ""
	s.mu.Unlock()
	if wasDown {
		n.log.Info("upstream reachable again", "url", url)
	}
}

// Readiness reports whether the node can do its job, and if not, why:
// a node with an upstream (RunUpstream) needs it connected and its
// metadata received; a mesh member needs to have joined; a node with a
// store needs it open. Safe for concurrent use.
func (n *Node) Readiness() (ready bool, reasons []string) {
	s := &n.up.status
	s.mu.Lock()
	wanted, lastErr := s.wanted, s.lastErr
	s.mu.Unlock()
	n.lock()
	closed := n.life.closed
	upReady := false
	for _, ls := range n.hub.order {
		if ls.kind == ownership.Upstream {
			_, upReady = ls.link.Metadata()
		}
	}
	storeWanted, storeOpen := n.opts.Store != nil, n.life.persist != nil
	m := n.hub.mesh
	n.mu.Unlock()
	if closed {
		reasons = append(reasons, "node shutting down")
	} else if n.life.draining.Load() {
		reasons = append(reasons, "draining")
	}
	if wanted && !upReady {
		r := "upstream not connected"
		if lastErr != "" {
			r = fmt.Sprintf("%s: %s", r, lastErr)
		}
		reasons = append(reasons, r)
	}
	if m != nil {
		if st := m.Status(); !st.Joined {
			r := "mesh not joined"
			if st.Error != "" {
				r += ": " + st.Error
			}
			reasons = append(reasons, r)
		}
	}
	if storeWanted && !storeOpen && !closed {
		reasons = append(reasons, "store not open")
	}
	return len(reasons) == 0, reasons
}
