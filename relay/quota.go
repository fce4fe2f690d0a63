package relay

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// ErrQuota is wrapped by the refusals of writes over a quota.
var ErrQuota = errors.New("relay: over quota")

// checkQuota refuses a downstream peer's write that would take an owner or
// an object over its quotas. n.mu must be held.
func (n *Node) checkQuota(c gameworld.Change, existing *gameworld.Object, owner string) error {
	q := &n.opts.Quotas
	if c.Type == gameworld.Remove {
		return nil
	}
	if existing == nil {
		// Adds earlier in the same batch count too (a refresh answer
		// brings all of a peer's objects in one message).
		if have := n.quota.owned[owner] + n.quota.batchAdds[owner]; have >= q.ObjectsPerOwner {
			n.life.metrics.Limited("objects_per_owner")
			return fmt.Errorf("%w: %s owns %d objects (limit %d)", ErrQuota, owner, have, q.ObjectsPerOwner)
		}
		if n.quota.batchAdds == nil {
			n.quota.batchAdds = map[string]int{}
		}
		n.quota.batchAdds[owner]++
	}
	return n.checkObjectSize(c, existing)
}

// checkTrusted bounds what the node accepts from its upstream and its mesh
// members, whose owners no per-owner quota covers: a broken or hostile
// upstream flooding distinct objects of many owners must not take the
// node's memory. Beyond the bounds their writes are refused (counted and
// logged); the node keeps serving what it has. n.mu must be held.
func (n *Node) checkTrusted(ls *linkState, c gameworld.Change, existing *gameworld.Object) error {
	q := &n.opts.Quotas
	if c.Type == gameworld.Remove {
		return nil
	}
	objects, bytes := n.world.Size()
	grows := c.Properties.Size()
	if existing == nil {
		if objects >= q.WorldObjects {
			return n.overWorld(ls, "world_objects", fmt.Errorf("%w: the world holds %d objects (limit %d)", ErrQuota, objects, q.WorldObjects))
		}
	} else {
		_, replaced := existing.Properties.Shared(c.Properties)
		grows -= replaced
	}
	if grows > 0 && bytes+grows > q.WorldBytes {
		return n.overWorld(ls, "world_bytes", fmt.Errorf("%w: the world's properties would take %d bytes (limit %d)", ErrQuota, bytes+grows, q.WorldBytes))
	}
	return n.checkObjectSize(c, existing)
}

// overWorld counts and logs (at most every 10 s) a write refused for the
// world's bounds, and returns err. n.mu must be held.
func (n *Node) overWorld(ls *linkState, limit string, err error) error {
	n.life.metrics.Limited(limit)
	if now := time.Now(); now.Sub(n.quota.worldWarned) > 10*time.Second {
		n.quota.worldWarned = now
		n.log.Warn("refusing objects from a trusted link: the world is at its bound (--max-world-objects, --max-world-bytes); serving what it has",
			"kind", ls.kind.String(), "err", err)
	}
	return err
}

// checkObjectSize refuses a write that would take an object over the
// per-object quotas. n.mu must be held.
func (n *Node) checkObjectSize(c gameworld.Change, existing *gameworld.Object) error {
	q := &n.opts.Quotas
	count, size := 0, 0
	if existing != nil {
		n, replaced := existing.Properties.Shared(c.Properties)
		count, size = existing.Properties.Len()-n, int(existing.Properties.Size()-replaced)
	}
	for k, v := range c.Properties.All() {
		if len(v) > q.ValueBytes {
			n.life.metrics.Limited("object_size")
			return fmt.Errorf("%w: property %q of %s has %d bytes (limit %d)", ErrQuota, k, c.ID, len(v), q.ValueBytes)
		}
		count++
		size += len(k) + len(v)
	}
	if count > q.PropertiesPerObject {
		n.life.metrics.Limited("object_size")
		return fmt.Errorf("%w: %s would have %d properties (limit %d)", ErrQuota, c.ID, count, q.PropertiesPerObject)
	}
	if size > q.ObjectBytes {
		n.life.metrics.Limited("object_size")
		return fmt.Errorf("%w: %s would hold %d bytes (limit %d)", ErrQuota, c.ID, size, q.ObjectBytes)
	}
	return n.checkScopeSize(c, existing)
}

// checkScopeSize bounds each scope a change writes: its elements and the
// bytes of its JSON object, as they would be at most (a modification is
// counted as adding its fields). n.mu must be held.
func (n *Node) checkScopeSize(c gameworld.Change, existing *gameworld.Object) error {
	q := &n.opts.Quotas
	var sc *gameworld.Scopes
	if existing != nil {
		sc = existing.Scopes
	}
	for name, d := range c.Scopes {
		count, size := 0, 0
		if !d.Full {
			var b int64
			count, b = sc.Size1(name)
			size = int(b) + 6*count
		}
		for _, m := range []map[string]scope.Fields{d.Added, d.Modified} {
			for id, f := range m {
				if d.Full || !sc.Has(name, id) {
					count++
					size += len(id) + 8
				}
				for k, v := range f {
					size += len(k) + len(v) + 4
				}
			}
		}
		if count > q.ScopeElements {
			n.life.metrics.Limited("scope_size")
			return fmt.Errorf("%w: scope %q of %s would hold %d elements (limit %d)", ErrQuota, name, c.ID, count, q.ScopeElements)
		}
		if size > q.ScopeBytes {
			n.life.metrics.Limited("scope_size")
			return fmt.Errorf("%w: scope %q of %s would take %d bytes (limit %d)", ErrQuota, name, c.ID, size, q.ScopeBytes)
		}
	}
	return nil
}

// countOwners keeps the objects per owner up to date with applied records.
// n.mu must be held.
func (n *Node) countOwners(recs []gameworld.Record) {
	clear(n.quota.batchAdds) // the batch is applied: its adds are in recs
	if n.quota.owned == nil {
		n.quota.owned = map[string]int{}
	}
	for i := range recs {
		switch recs[i].Type {
		case gameworld.Add:
			n.quota.owned[recs[i].Owner]++
		case gameworld.Remove:
			if n.quota.owned[recs[i].Owner]--; n.quota.owned[recs[i].Owner] <= 0 {
				delete(n.quota.owned, recs[i].Owner)
			}
		case gameworld.Transfer:
			n.quota.owned[recs[i].Owner]++
			if n.quota.owned[recs[i].PrevOwner]--; n.quota.owned[recs[i].PrevOwner] <= 0 {
				delete(n.quota.owned, recs[i].PrevOwner)
			}
		}
	}
}

// admitIP counts a connection from r's address, or refuses it with 429.
// The returned function releases it.
func (n *Node) admitIP(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hub.perIP == nil {
		n.hub.perIP = map[string]int{}
	}
	if n.hub.perIP[ip] >= n.opts.Quotas.ConnectionsPerIP {
		n.log.Info("refused a connection over the per-address limit", "ip", ip, "limit", n.opts.Quotas.ConnectionsPerIP)
		n.life.metrics.Limited("connections_per_ip")
		http.Error(w, "too many connections from this address", http.StatusTooManyRequests)
		return nil, false
	}
	n.hub.perIP[ip]++
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.hub.perIP[ip]--; n.hub.perIP[ip] <= 0 {
			delete(n.hub.perIP, ip)
		}
	}, true
}

// quotaState is what quotas count (quota.go).
type quotaState struct {
	// owned counts objects per owner, for Quotas.ObjectsPerOwner.
	owned map[string]int
	// batchAdds counts the adds a batch being applied has let in so
	// far, per owner.
	batchAdds map[string]int
	// worldWarned is when a write over the world's bounds was last
	// logged.
	worldWarned time.Time
}
