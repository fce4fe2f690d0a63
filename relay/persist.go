package relay

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/store"
)

// Durability (Options.Store). The node keeps durable the objects that
// are its to keep: those it owns, and persistent ones owned by worlds
// behind its downstream links (a mesh member or an upstream keeps its
// own). Routing notes which objects may have changed durability or
// content; each flush turns them into one batch for a store.Writer, which
// writes it, one transaction per batch, on a goroutine of its own. So a
// change is on disk about one tick after it took effect, and a slow or
// full disk delays nothing else.
//
// On start the node loads the store before it accepts anyone: its
// identifier and resume secret, so that restored objects stay its own and
// peers' resume tokens stay valid, and its durable objects with their
// owners and epochs. Objects of worlds that were behind its links are
// held for them for the reclaim grace, as for a peer whose connection
// broke: a peer that reconnects (with its resume token) takes them back;
// otherwise they fall to the node.

// persist is the node's side of its store. Guarded by Node.mu, except
// the counters.
type persist struct {
	w *store.Writer
	// stored are the ids the store holds (or is about to).
	stored map[string]bool
	// dirty are the ids whose durable state may have changed since the
	// last flush.
	dirty map[string]struct{}
	// meta is the store's named values, as loaded and set since.
	meta map[string][]byte

	writes, failures, written atomic.Uint64
}

// openStoreLocked loads st into the new node's world and starts writing
// to s. n.mu must be held (or n not yet shared).
func (n *Node) openStoreLocked(s store.Store, st store.State) {
	p := &persist{stored: map[string]bool{}, dirty: map[string]struct{}{}, meta: st.Meta}
	p.w = store.NewWriter(s, store.WriterOptions{Logger: n.log, Written: func(puts, deletes int, err error) {
		if err != nil {
			p.failures.Add(1)
			return
		}
		p.writes.Add(1)
		p.written.Add(uint64(puts + deletes))
	}})
	n.life.persist = p
	// The identity first: a restored object must stay this node's.
	var ident store.Batch
	if st.Identifier != n.id {
		ident.Identifier = n.id
		if st.Identifier != "" {
			n.log.Warn("the configured identifier differs from the stored one; objects the node owned under the old one are held for it like a departed peer's", "stored", st.Identifier, "identifier", n.id)
		}
	}
	if string(st.ResumeSecret) != string(n.hub.resumeSecret) {
		ident.ResumeSecret = n.hub.resumeSecret
	}
	p.w.Queue(ident)
	if len(st.Objects) == 0 {
		return
	}
	changes := make([]gameworld.Change, 0, len(st.Objects))
	for _, o := range st.Objects {
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: o.ID, Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties, Scopes: o.Scopes})
		p.stored[o.ID] = true
	}
	n.quota.ledger.Count(n.world.Apply(changes, nil).Records)
	if n.opts.Validator != nil {
		// Kept (nothing a user owns is lost), but said: the schemas
		// changed since, or the store was written without them.
		bad := 0
		for _, c := range changes {
			if err := n.opts.Validator.Check(c, nil); err != nil {
				if bad++; bad <= 5 {
					n.log.Warn("a stored object breaks the property schemas; kept as it is", "id", c.ID, "reason", err)
				}
			}
		}
		if bad > 5 {
			n.log.Warn("more stored objects break the property schemas", "count", bad)
		}
	}
	owners := map[string]bool{}
	for _, o := range st.Objects {
		if o.Owner != n.id {
			owners[o.Owner] = true
		}
	}
	n.log.Info("restored the world from the store", "objects", len(st.Objects), "held for departed worlds", len(owners))
	if len(changes) > 10_000 {
		// The decoded store and the changes are garbage now, and as large
		// as the world: give the memory back before serving.
		clear(changes)
		clear(st.Objects)
		debug.FreeOSMemory()
	}
	if len(owners) == 0 {
		return
	}
	if n.opts.ReclaimGrace < 0 {
		n.keepPersistentLocked(owners, n.id)
		return
	}
	// Held for their worlds as for a dropped link's, which a reconnecting
	// peer takes over with its resume token.
	n.holdWorldsLocked(owners, ownership.Downstream, "")
}

// noteDurableLocked marks a routed record's object if its durable state
// may have changed. n.mu must be held.
func (p *persist) noteLocked(n *Node, r *gameworld.Record) {
	switch {
	case p.stored[r.ID]:
	case r.Type == gameworld.Remove:
		return
	case r.Type == gameworld.Update:
		if _, ok := r.Properties.Get(PropPersistent); !ok {
			return
		}
	case r.Owner != n.id && !flagsOf(r.After).Persistent:
		return
	}
	p.dirty[r.ID] = struct{}{}
}

// durable reports whether o is this node's to keep. n.mu must be held.
func (n *Node) durable(o gameworld.Object) bool {
	if o.Owner == n.id {
		return true
	}
	return flagsOf(o.Properties).Persistent && n.ownerInfo(o.Owner).local
}

// flushLocked queues the durable state of what changed since the last
// flush. n.mu must be held.
func (p *persist) flushLocked(n *Node) {
	if len(p.dirty) == 0 {
		return
	}
	var b store.Batch
	for id := range p.dirty {
		o, ok := n.world.Get(id)
		switch {
		case ok && n.durable(o):
			b.Put = append(b.Put, store.Object{ID: o.ID, Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties, Scopes: o.Scopes.Snapshots()})
			p.stored[id] = true
		case p.stored[id]:
			b.Delete = append(b.Delete, id)
			delete(p.stored, id)
		}
	}
	clear(p.dirty)
	p.w.Queue(b)
}

// StoredValue returns a named value of the node's store (nil if none, or
// without a store).
func (n *Node) StoredValue(key string) []byte {
	n.lock()
	defer n.mu.Unlock()
	if n.life.persist == nil {
		return nil
	}
	return n.life.persist.meta[key]
}

// StoreValue sets a named value of the node's store, written with the
// next batch. Without a store it does nothing.
func (n *Node) StoreValue(key string, v []byte) {
	n.lock()
	defer n.mu.Unlock()
	if n.life.persist == nil {
		return
	}
	if n.life.persist.meta == nil {
		n.life.persist.meta = map[string][]byte{}
	}
	v = append([]byte(nil), v...)
	n.life.persist.meta[key] = v
	n.life.persist.w.Queue(store.Batch{Meta: map[string][]byte{key: v}})
}

// closeStoreLocked writes the last changes and stops recording: what
// the node's shutdown does to the world (its peers leaving) is not kept,
// so that a restart finds the world as it was while the node ran. It
// returns the writer to close once n.mu is released. n.mu must be held.
func (n *Node) closeStoreLocked() *store.Writer {
	p := n.life.persist
	if p == nil {
		return nil
	}
	p.flushLocked(n)
	n.life.persist = nil
	return p.w
}
