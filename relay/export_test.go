package relay

// What the external tests (package relay_test) may see of the node's
// internals: its constants and the few states a test must reach or
// inspect. Compiled into tests only.

import (
	"sort"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"golang.org/x/time/rate"
)

const (
	DepartSlice  = departSlice
	RefreshSlice = refreshSlice
	RegionEvery  = regionEvery
)

type RefusedData = refusedData

// locked runs fn with the node's lock held.
func (n *Node) locked(fn func()) {
	n.lock()
	defer n.mu.Unlock()
	fn()
}

// ReadyLinks counts links other than the upstream whose metadata the node
// knows.
func (n *Node) ReadyLinks() (c int) {
	n.locked(func() {
		for _, ls := range n.hub.order {
			if ls.ready && ls.kind != ownership.Upstream {
				c++
			}
		}
	})
	return c
}

// RefusedCount sums the records refused on every link.
func (n *Node) RefusedCount() (c uint64) {
	n.locked(func() {
		for _, ls := range n.hub.order {
			c += ls.link.Stats().Refused.Load()
		}
	})
	return c
}

// Claimed reports whether a link claims world id.
func (n *Node) Claimed(id string) (ok bool) {
	n.locked(func() { ok = n.hub.claims[id] != nil })
	return ok
}

// DialectOf returns the dialect of the link that claims id.
func (n *Node) DialectOf(id string) (d string) {
	n.locked(func() {
		if ls := n.hub.claims[id]; ls != nil {
			d = ls.link.Dialect()
		}
	})
	return d
}

// ChainOf returns the identifierChain of the link that claims id, sorted,
// or nil.
func (n *Node) ChainOf(id string) (out []string) {
	n.locked(func() {
		if ls := n.hub.claims[id]; ls != nil {
			for c := range ls.chain {
				out = append(out, c)
			}
		}
	})
	sort.Strings(out)
	return out
}

// RefreshAnswered reports whether the link that claims id asked for a
// refresh and was answered.
func (n *Node) RefreshAnswered(id string) (ok bool) {
	n.locked(func() {
		ls := n.hub.claims[id]
		ok = ls != nil && ls.link.Stats().MessagesIn[peer.KindRequestRefresh].Load() > 0 && !ls.refreshWanted
	})
	return ok
}

// CloseLinkOf closes the link that claims id, if any.
func (n *Node) CloseLinkOf(id string, code peer.StatusCode, reason string) {
	n.locked(func() {
		if ls := n.hub.claims[id]; ls != nil {
			ls.link.Close(code, reason)
		}
	})
}

// CloseLinks closes every link of a kind (to member, if set).
func (n *Node) CloseLinks(kind ownership.LinkKind, member string, code peer.StatusCode, reason string) {
	n.locked(func() {
		for _, ls := range n.hub.order {
			if ls.kind == kind && (member == "" || ls.member == member) {
				ls.link.Close(code, reason)
			}
		}
	})
}

// Departing reports whether a departure is under way.
func (n *Node) Departing() (d bool) {
	n.locked(func() { d = len(n.deps.departing) > 0 })
	return d
}

// SetYieldHook runs fn whenever a long task lets the lock go.
func (n *Node) SetYieldHook(fn func()) { n.locked(func() { n.deps.yieldHook = fn }) }

// SetRevealHook runs fn, with the lock held, after each slice of a region
// change.
func (n *Node) SetRevealHook(fn func(done bool)) { n.locked(func() { n.sp.revealHook = fn }) }

// ApplyLocked applies changes as the node's own and routes them; the lock
// must be held (from a hook).
func (n *Node) ApplyLocked(changes []gameworld.Change) {
	n.route(n.world.Apply(changes, nil).Records, nil)
}

// SpatialIndexActive reports whether the node keeps a spatial index.
func (n *Node) SpatialIndexActive() (a bool) {
	n.locked(func() { a = n.sp.Active() })
	return a
}

// FlushNow offers the shared log to the links now.
func (n *Node) FlushNow() { n.locked(n.flushLocked) }

// HasResumeToken reports whether the upstream handed a resume token for id.
func (n *Node) HasResumeToken(id string) (ok bool) {
	n.locked(func() { ok = n.up.tokens[id] != "" })
	return ok
}

// ForgetResumeToken drops the resume token of id.
func (n *Node) ForgetResumeToken(id string) { n.locked(func() { delete(n.up.tokens, id) }) }

// Locked runs fn with the node's lock held: a change applied there is
// applied as anything the node does.
func (n *Node) Locked(fn func()) { n.locked(fn) }

// RoomOf and PositionOf read an object's room and position as the node
// does.
func (n *Node) RoomOf(props gameworld.Properties) string { return n.sp.Props.RoomOf(props) }

func (n *Node) PositionOf(props gameworld.Properties) ([3]float64, bool) {
	return n.sp.Props.PositionOf(props)
}

// SendDigestNow sends the digest of a link that speaks digests at once,
// without the budget; false if none does.
func (n *Node) SendDigestNow() (sent bool) {
	n.locked(func() {
		n.dig.budget = rate.NewLimiter(rate.Inf, 0)
		for _, ls := range n.hub.order {
			if speaksDigest(ls) {
				ls.digest.MakeDue(time.Now())
				sent = true
			}
		}
		n.sendDigestsLocked(time.Now())
	})
	return sent
}
