package scope

import "iter"

// keyed maps element ids to V. Ids of one to eight bytes with no zero byte
// (a block's "12,31,5", most ids in practice) are packed into a uint64
// key: a map slot then holds no string header, and the id no allocation
// of its own, which is most of what an element costs. Other ids go in a
// map by string.
type keyed[V any] struct {
	short map[uint64]V
	long  map[string]V
}

// pack returns id packed into a uint64 (its bytes little-endian, zeros
// after), if it fits.
func pack(id string) (uint64, bool) {
	if len(id) == 0 || len(id) > 8 {
		return 0, false
	}
	var k uint64
	for i := 0; i < len(id); i++ {
		if id[i] == 0 {
			return 0, false
		}
		k |= uint64(id[i]) << (8 * i)
	}
	return k, true
}

func unpack(k uint64) string {
	var b [8]byte
	n := 0
	for ; k != 0; k >>= 8 {
		b[n] = byte(k)
		n++
	}
	return string(b[:n])
}

func (m *keyed[V]) get(id string) (V, bool) {
	if k, ok := pack(id); ok {
		v, ok := m.short[k]
		return v, ok
	}
	v, ok := m.long[id]
	return v, ok
}

func (m *keyed[V]) put(id string, v V) {
	if k, ok := pack(id); ok {
		if m.short == nil {
			m.short = map[uint64]V{}
		}
		m.short[k] = v
		return
	}
	if m.long == nil {
		m.long = map[string]V{}
	}
	m.long[id] = v
}

func (m *keyed[V]) del(id string) {
	if k, ok := pack(id); ok {
		delete(m.short, k)
		return
	}
	delete(m.long, id)
}

func (m *keyed[V]) len() int { return len(m.short) + len(m.long) }

// all yields every id and value, in no particular order.
func (m *keyed[V]) all() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for k, v := range m.short {
			if !yield(unpack(k), v) {
				return
			}
		}
		for id, v := range m.long {
			if !yield(id, v) {
				return
			}
		}
	}
}

// elem returns the stored element id, which must exist.
func (s *Scope) elem(id string) elem {
	e, _ := s.elems.get(id)
	return e
}
