package relay

import (
	"github.com/solipsism/mesh/gameworld"
)

// sweep tracks which objects an upstream sent since we (re)connected, so that
// when its refresh answer is complete, objects that vanished upstream while
// we were away can be removed here too.
type sweep struct {
	seen map[string]bool
}

func newSweep() *sweep { return &sweep{seen: make(map[string]bool)} }

func (s *sweep) see(changes []gameworld.Change) {
	for _, c := range changes {
		if c.Type == gameworld.Remove {
			delete(s.seen, c.ID)
		} else {
			s.seen[c.ID] = true
		}
	}
}

// finishSweep removes every object that is neither local nor confirmed by
// the upstream's refresh answer. n.mu must be held.
func (n *Node) finishSweep(ls *linkState) {
	s := ls.sweep
	ls.sweep = nil
	var changes []gameworld.Change
	for _, o := range n.world.Objects() {
		if s.seen[o.ID] || n.relation(ls, o.Owner).Local {
			continue
		}
		changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: o.ID})
	}
	if len(changes) == 0 {
		return
	}
	res := n.world.Apply(changes, nil)
	n.route(res.Records)
	n.log.Info("removed objects that vanished upstream while disconnected", "objects", len(res.Records))
}
