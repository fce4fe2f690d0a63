package quota

import (
	"errors"
	"fmt"
	"sync"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// ErrQuota is wrapped by every refusal.
var ErrQuota = errors.New("over quota")

// Error is a write or connection refused by a limit.
type Error struct {
	// Limit names the limit: objects_per_owner, object_size, scope_size,
	// world_objects, world_bytes, connections_per_ip.
	Limit string
	msg   string
}

func (e *Error) Error() string { return "over quota: " + e.msg }
func (e *Error) Unwrap() error { return ErrQuota }

func refuse(limit, format string, args ...any) *Error {
	return &Error{Limit: limit, msg: fmt.Sprintf(format, args...)}
}

// Ledger counts the objects each owner holds, and the adds of the batch
// being applied.
type Ledger struct {
	owned, batchAdds map[string]int
}

// Owned returns how many objects owner holds.
func (l *Ledger) Owned(owner string) int { return l.owned[owner] }

// Admit checks a downstream peer's write to object c.ID (existing, if the
// world holds it) for owner: the objects per owner, counting adds earlier
// in the same batch (a refresh answer brings all of a peer's objects in one
// message), then the object's size.
func (l *Ledger) Admit(lim *Limits, c gameworld.Change, existing *gameworld.Object, owner string) error {
	if c.Type == gameworld.Remove {
		return nil
	}
	if existing == nil {
		if have := l.owned[owner] + l.batchAdds[owner]; have >= lim.ObjectsPerOwner {
			return refuse("objects_per_owner", "%s owns %d objects (limit %d)", owner, have, lim.ObjectsPerOwner)
		}
		if l.batchAdds == nil {
			l.batchAdds = map[string]int{}
		}
		l.batchAdds[owner]++
	}
	return CheckObject(lim, c, existing)
}

// Count keeps the counts up to date with applied records; the batch's
// adds are in them.
func (l *Ledger) Count(recs []gameworld.Record) {
	clear(l.batchAdds)
	if l.owned == nil {
		l.owned = map[string]int{}
	}
	dec := func(owner string) {
		if l.owned[owner]--; l.owned[owner] <= 0 {
			delete(l.owned, owner)
		}
	}
	for i := range recs {
		switch recs[i].Type {
		case gameworld.Add:
			l.owned[recs[i].Owner]++
		case gameworld.Remove:
			dec(recs[i].Owner)
		case gameworld.Transfer:
			l.owned[recs[i].Owner]++
			dec(recs[i].PrevOwner)
		}
	}
}

// CheckWorld bounds a write from a link no per-owner quota covers (an
// upstream, a mesh member) by the world it would grow: objects and bytes
// are the world's now (gameworld.World.Size). Then the object's size.
func CheckWorld(lim *Limits, c gameworld.Change, existing *gameworld.Object, objects int, bytes int64) error {
	if c.Type == gameworld.Remove {
		return nil
	}
	grows := c.Properties.Size()
	if existing == nil {
		if objects >= lim.WorldObjects {
			return refuse("world_objects", "the world holds %d objects (limit %d)", objects, lim.WorldObjects)
		}
	} else {
		_, replaced := existing.Properties.Shared(c.Properties)
		grows -= replaced
	}
	if grows > 0 && bytes+grows > lim.WorldBytes {
		return refuse("world_bytes", "the world's properties would take %d bytes (limit %d)", bytes+grows, lim.WorldBytes)
	}
	return CheckObject(lim, c, existing)
}

// CheckObject bounds the object a write leaves: its properties, each
// value, its bytes, and each scope it writes.
func CheckObject(lim *Limits, c gameworld.Change, existing *gameworld.Object) error {
	count, size := 0, 0
	if existing != nil {
		n, replaced := existing.Properties.Shared(c.Properties)
		count, size = existing.Properties.Len()-n, int(existing.Properties.Size()-replaced)
	}
	for k, v := range c.Properties.All() {
		if len(v) > lim.ValueBytes {
			return refuse("object_size", "property %q of %s has %d bytes (limit %d)", k, c.ID, len(v), lim.ValueBytes)
		}
		count++
		size += len(k) + len(v)
	}
	if count > lim.PropertiesPerObject {
		return refuse("object_size", "%s would have %d properties (limit %d)", c.ID, count, lim.PropertiesPerObject)
	}
	if size > lim.ObjectBytes {
		return refuse("object_size", "%s would hold %d bytes (limit %d)", c.ID, size, lim.ObjectBytes)
	}
	return checkScopes(lim, c, existing)
}

// checkScopes bounds each scope a change writes: its elements and the
// bytes of its JSON object, as they would be at most (a modification is
// counted as adding its fields).
func checkScopes(lim *Limits, c gameworld.Change, existing *gameworld.Object) error {
	if len(c.Scopes) == 0 {
		return nil
	}
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
		if count > lim.ScopeElements {
			return refuse("scope_size", "scope %q of %s would hold %d elements (limit %d)", name, c.ID, count, lim.ScopeElements)
		}
		if size > lim.ScopeBytes {
			return refuse("scope_size", "scope %q of %s would take %d bytes (limit %d)", name, c.ID, size, lim.ScopeBytes)
		}
	}
	return nil
}

// PerIP counts connections per address.
type PerIP struct {
	mu sync.Mutex
	n  map[string]int
}

// Admit counts a connection from ip if fewer than limit are open; the
// returned function releases it.
func (p *PerIP) Admit(ip string, limit int) (release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[ip] >= limit {
		return nil, refuse("connections_per_ip", "%d connections from %s (limit %d)", p.n[ip], ip, limit)
	}
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[ip]++
	return sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.n[ip]--; p.n[ip] <= 0 {
			delete(p.n, ip)
		}
	}), nil
}
