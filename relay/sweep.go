package relay

import (
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
)

// sweepTimeout bounds how long a node waits for an upstream's refresh
// answer to be marked complete. Upstreams that do not mark it (the 2016
// library) never trigger a sweep: stale objects are kept rather than
// removing live ones on a guess.
const sweepTimeout = 30 * time.Second

// sweep tracks which objects an upstream sent since we (re)connected, so that
// when its refresh answer is complete, objects that vanished upstream while
// we were away can be removed here too. The set is bounded by the number of
// objects.
type sweep struct {
	seen     map[string]bool
	deadline time.Time
	// owners, for a downstream link, are the identifiers it took over from
	// a dropped link: only their objects are swept.
	owners map[string]bool
}

func (s *sweep) claim(owner string) {
	if s.owners == nil {
		s.owners = make(map[string]bool)
	}
	s.owners[owner] = true
}

func newSweep() *sweep {
	return &sweep{seen: make(map[string]bool), deadline: time.Now().Add(sweepTimeout)}
}

func (s *sweep) see(changes []gameworld.Change) {
	for _, c := range changes {
		if c.Type == gameworld.Remove {
			delete(s.seen, c.ID)
		} else {
			s.seen[c.ID] = true
		}
	}
}

// finishSweep removes the objects the link's refresh answer should have
// confirmed but did not: for an upstream link every object that is not
// local, for a mesh link every object owned behind that link. n.mu must be
// held.
func (n *Node) finishSweep(ls *linkState) {
	s := ls.sweep
	ls.sweep = nil
	removed := n.removeWhere(func(o gameworld.Object) bool {
		switch {
		case s.seen[o.ID]:
			return false
		case ls.kind == ownership.Mesh:
			return n.hub.claims[o.Owner] == ls
		case ls.kind == ownership.Downstream:
			return s.owners[o.Owner] && n.hub.claims[o.Owner] == ls
		default:
			return !n.relation(ls, o.Owner).Local
		}
	}, nil)
	if removed > 0 {
		n.log.Info("removed objects that vanished while disconnected", "kind", ls.kind.String(), "objects", removed)
	}
}
