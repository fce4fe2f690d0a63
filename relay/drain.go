package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Draining: a node about to stop (a rolling upgrade, SIGTERM) sends its
// clients elsewhere before it goes, so that none of them waits on a dead
// connection and none of their objects blinks out for the others.

// TypeMoved is the type of the message a draining node sends each
// downstream peer that takes messages: data {"urls": [...]}, the nodes to
// connect to instead, in order. A client connects to the first it can at
// once, and keeps its own list after them.
const TypeMoved = "solipsism.moved"

// DrainOptions configures Node.Drain. The zero value is usable.
type DrainOptions struct {
	// URLs are where the node's clients should go; nil means the other
	// mesh members' advertised URLs.
	URLs []string
	// Grace bounds how long clients have to leave: then the node closes
	// the links that remain (1012, service restart). Zero means 5 s.
	Grace time.Duration
}

// movedData is TypeMoved's data.
type movedData struct {
	URLs []string `json:"urls"`
}

// Drain makes the node stop taking clients and sends those it has
// elsewhere: Readiness says "draining", a new WebSocket handshake is
// refused with 503, and every downstream peer that takes messages is sent
// a TypeMoved message naming where to go; the others (and all of them when
// there is nowhere to go) are closed at once with 1012. It returns when no
// downstream link is left (closing those that remain after opts.Grace, or
// when ctx is done). The node keeps
// serving its mesh and upstream links until it is closed.
func (n *Node) Drain(ctx context.Context, opts DrainOptions) error {
	if opts.Grace <= 0 {
		opts.Grace = 5 * time.Second
	}
	n.lock()
	if n.life.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	n.life.draining.Store(true)
	m := n.hub.mesh
	n.mu.Unlock()
	if opts.URLs == nil && m != nil {
		for _, mb := range m.Status().Members {
			if mb.URL != "" {
				opts.URLs = append(opts.URLs, mb.URL)
			}
		}
	}
	data, _ := json.Marshal(movedData{URLs: opts.URLs}) // plain strings
	n.lock()
	told, closed := 0, 0
	n.hub.clients(func(ls *linkState) {
		if md, ok := ls.link.Metadata(); ok && md.Has(peer.FeatureMessages) && len(opts.URLs) > 0 {
			n.postLocked(peer.AppMessage{From: n.id, Type: TypeMoved, World: md.Identifier, Data: data}, nil, n.ownerInfo(n.id))
			told++
			return
		}
		// A peer that cannot be told (a 2016 one), or with nowhere to go:
		// closed now, to reconnect by itself (its objects are kept for
		// the reclaim grace).
		ls.link.Close(peer.StatusServiceRestart, "node draining: connect to another")
		closed++
	})
	n.mu.Unlock()
	n.log.Info("draining: sending clients elsewhere", "told", told, "closed", closed, "to", opts.URLs, "grace", opts.Grace)
	deadline := time.NewTimer(opts.Grace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n.lock()
		left := 0
		n.hub.clients(func(*linkState) { left++ })
		n.mu.Unlock()
		if left == 0 {
			n.log.Info("drained: every client left")
			return nil
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		n.lock()
		left = 0
		n.hub.clients(func(ls *linkState) {
			ls.link.Close(peer.StatusServiceRestart, "node draining: connect to another")
			left++
		})
		n.mu.Unlock()
		n.log.Info("drained: closed the links of clients that stayed", "clients", left)
		return ctx.Err()
	}
}

// Draining reports whether Drain was called: bridges take no new client
// then either.
func (n *Node) Draining() bool { return n.life.draining.Load() }

// refuseDraining answers a handshake while the node drains (503, with
// Retry-After), and reports whether it did.
func (n *Node) refuseDraining(w http.ResponseWriter) bool {
	if !n.life.draining.Load() {
		return false
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "this node is draining: connect to another", http.StatusServiceUnavailable)
	return true
}

// watchMoved is RunUpstream's subscription to this node's messages (so
// called with n.mu held): a TypeMoved from the upstream says it drains and
// where to go. The upstream link closes, and RunUpstream dials those first.
func (n *Node) watchMoved(m peer.AppMessage) {
	if m.Type != TypeMoved {
		return
	}
	var d movedData
	if json.Unmarshal(m.Data, &d) != nil || len(d.URLs) == 0 {
		return
	}
	for _, ls := range n.hub.order {
		if ls.link == nil || ls.kind != ownership.Upstream {
			continue
		}
		if md, ok := ls.link.Metadata(); ok && md.Identifier == m.From {
			n.up.moved = d.URLs
			n.log.Info("the upstream is draining; moving", "to", d.URLs)
			ls.link.Close(peer.StatusMoving, "moving to another node")
		}
	}
}

// takeMoved returns the URLs a draining upstream sent us to, once.
func (n *Node) takeMoved() []string {
	n.lock()
	defer n.mu.Unlock()
	moved := n.up.moved
	n.up.moved = nil
	return moved
}

// mergeURLs returns first, then the URLs of then not among them.
func mergeURLs(first, then []string) []string {
	out := slices.Clone(first)
	for _, u := range then {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}
