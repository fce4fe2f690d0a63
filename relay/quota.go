package relay

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/quota"
)

// ErrQuota is wrapped by the refusals of writes over a quota.
var ErrQuota = quota.ErrQuota

// limitedBy counts a refusal by its limit, and returns it.
func (n *Node) limitedBy(err error) error {
	var qe *quota.Error
	if errors.As(err, &qe) {
		n.life.metrics.Limited(qe.Limit)
	}
	return err
}

// checkQuota refuses a downstream peer's write that would take an owner or
// an object over its quotas. n.mu must be held.
func (n *Node) checkQuota(c gameworld.Change, existing *gameworld.Object, owner string) error {
	if c.PreparedFor(existing) {
		return nil // (an update within the object's quotas: quotaOf said so)
	}
	return n.limitedBy(n.quota.ledger.Admit(&n.opts.Quotas, c, existing, owner))
}

// quotaOf is the part of checkQuota that depends on the object alone (its
// size and properties), for gameworld.Prepare: it runs without n.mu.
func (n *Node) quotaOf(c gameworld.Change, existing *gameworld.Object) error {
	return quota.CheckObject(&n.opts.Quotas, c, existing)
}

// checkTrusted bounds what the node accepts from its upstream and its mesh
// members, whose owners no per-owner quota covers: a broken or hostile
// upstream flooding distinct objects of many owners must not take the
// node's memory. Beyond the bounds their writes are refused (counted and
// logged at most every 10 s); the node keeps serving what it has. n.mu
// must be held.
func (n *Node) checkTrusted(ls *linkState, c gameworld.Change, existing *gameworld.Object) error {
	objects, bytes := n.world.Size()
	err := n.limitedBy(quota.CheckWorld(&n.opts.Quotas, c, existing, objects, bytes))
	var qe *quota.Error
	if errors.As(err, &qe) && qe.Limit != "object_size" && qe.Limit != "scope_size" {
		if now := time.Now(); now.Sub(n.quota.worldWarned) > 10*time.Second {
			n.quota.worldWarned = now
			n.log.Warn("refusing objects from a trusted link: the world is at its bound (--max-world-objects, --max-world-bytes); serving what it has",
				"kind", ls.kind.String(), "err", err)
		}
	}
	return err
}

// admitIP counts a connection from r's address, or refuses it with 429.
// The returned function releases it.
func (n *Node) admitIP(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	release, err = n.quota.perIP.Admit(ip, n.opts.Quotas.ConnectionsPerIP)
	if err != nil {
		n.log.Info("refused a connection over the per-address limit", "ip", ip, "limit", n.opts.Quotas.ConnectionsPerIP)
		n.limitedBy(err)
		http.Error(w, "too many connections from this address", http.StatusTooManyRequests)
		return nil, false
	}
	return release, true
}

// quotaState is what quotas count (package quota).
type quotaState struct {
	ledger quota.Ledger
	perIP  quota.PerIP
	// worldWarned is when a write over the world's bounds was last
	// logged.
	worldWarned time.Time
}
