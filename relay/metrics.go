package relay

import (
	"github.com/solipsism/mesh/metrics"
	"github.com/solipsism/mesh/ownership"
)

// metricsSource is what package metrics reads of a node at a scrape.
type metricsSource struct{ n *Node }

func (s metricsSource) Snapshot() metrics.Snapshot {
	n := s.n
	n.lock()
	out := metrics.Snapshot{Totals: n.hub.totals, Members: -1, Objects: n.world.Len(),
		Links: map[ownership.LinkKind]int{ownership.Downstream: 0, ownership.Upstream: 0, ownership.Mesh: 0}}
	for _, ls := range n.hub.order {
		out.Links[ls.kind]++
		out.Totals.Add(ls.link)
		out.Queued += ls.link.Queued()
	}
	m := n.hub.mesh
	if p := n.life.persistStats; p != nil {
		out.Stored, out.StoreWrites, out.StoreFailures = true, p.writes.Load(), p.failures.Load()
		if n.life.persist != nil {
			out.StoreObjects = len(n.life.persist.stored)
		}
	}
	n.mu.Unlock()
	out.Bridged = n.bridgedCounts()
	if m != nil {
		out.Members = len(m.Status().Members)
	}
	return out
}
