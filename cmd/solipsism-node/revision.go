package main

import (
	"context"
	"strconv"
	"time"

	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/internal/loop"
	"github.com/solipsism/mesh/relay"
)

// Alloverse revisions keep increasing across restarts: the store holds a
// lease, a revision the bridge has not reached, and a restarted bridge
// starts there. The lease moves ahead long before the bridge reaches it
// (a revision a heartbeat at most), so a crash never reuses a revision a
// client may have seen.
const (
	revisionKey   = "alloverse.revision-lease"
	revisionAhead = 1 << 20
)

// revisionLease returns the revision a bridge starts from: the stored
// lease (0 for a new store, or without one).
func revisionLease(n *relay.Node) uint64 {
	v, _ := strconv.ParseUint(string(n.StoredValue(revisionKey)), 10, 64)
	if v > alloverse.MaxRevision {
		v = 0
	}
	return v
}

// keepRevisionLease stores a lease ahead of the bridge's revision, and
// moves it on whenever the bridge is half way there.
func keepRevisionLease(ctx context.Context, n *relay.Node, b *alloverse.Bridge, first uint64) {
	lease := first + revisionAhead
	n.StoreValue(revisionKey, []byte(strconv.FormatUint(lease, 10)))
	loop.Every(ctx, time.Second, func() {
		if rev := b.Revision(); rev+revisionAhead/2 > lease && rev+revisionAhead <= alloverse.MaxRevision {
			lease = rev + revisionAhead
			n.StoreValue(revisionKey, []byte(strconv.FormatUint(lease, 10)))
		}
	})
}
