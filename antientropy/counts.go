package antientropy

import (
	"sync"
	"sync/atomic"
)

// Repair kinds: an object the peer lacked, one whose copy differed, and one
// it held that it should not have.
const (
	Missing = "missing"
	Stale   = "stale"
	Extra   = "extra"
)

// Kinds are the repair kinds, in the order they are reported.
var Kinds = []string{Missing, Stale, Extra}

// Counts counts repairs by kind. The zero value counts none. It is safe for
// concurrent use.
type Counts struct {
	missing, stale, extra atomic.Uint64
	mu                    sync.Mutex
	seen                  map[string]bool
}

func (c *Counts) of(kind string) *atomic.Uint64 {
	switch kind {
	case Missing:
		return &c.missing
	case Stale:
		return &c.stale
	}
	return &c.extra
}

// Add counts n repairs of a kind and reports whether they are the first of
// that kind (a divergence worth a warning; later ones are logged quieter).
func (c *Counts) Add(kind string, n int) (first bool) {
	c.of(kind).Add(uint64(n))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[kind] {
		return false
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[kind] = true
	return true
}

// Map returns the counts by kind.
func (c *Counts) Map() map[string]uint64 {
	out := make(map[string]uint64, len(Kinds))
	for _, k := range Kinds {
		out[k] = c.of(k).Load()
	}
	return out
}
