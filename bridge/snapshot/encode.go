package snapshot

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// maxDespawnsPerPacket is the despawns' reserved share of a packet: 64
// ids of 32 bits, a fifth of it.
const maxDespawnsPerPacket = 64

// minGhostBits is less than any ghost costs (its id and a share of the
// headers, a data size, a buffer count and a change mask); maxMisses is
// how many ghosts in a row that do not fit end a packet.
const (
	minGhostBits = 32
	maxMisses    = 16
)

// candidate is a ghost that one snapshot may carry.
type candidate struct {
	g        *ghost
	cg       *clientGhost
	prio     uint64
	b0, b1   *base
	t0, t1   uint32
	compact  bool // in a compact group: it has a baseline and no buffers to send
	from, to int  // its encoded body in the scratch writer
	mask     uint32
	size     uint32
	spans    []span
	named    []naming
}

// snapshotLocked writes the client's snapshot for this tick into w and
// keeps it as a possible baseline; it returns how many ghosts it carries
// and their bits. s.mu must be held.
func (s *Server) snapshotLocked(c *conn, w *Writer) (ghosts, ghostBits int) {
	tick := s.tick
	h := header{LocalTime: s.now(), ReturnTime: c.cmdTime, Seq: c.seq, Tick: tick, LastCmd: c.lastCmd, CmdMask: c.cmdMask}
	if !c.cmdAt.IsZero() {
		h.CommandAge = uint32(time.Since(c.cmdAt).Milliseconds())
	}
	c.seq++
	h.write(w)

	start, end := c.loaded, min(len(s.types), c.loaded+maxPrefabsPerPacket)
	list := make([]prefab, 0, end-start)
	for i := start; i < end; i++ {
		list = append(list, prefab{GUID: s.types[i].GUID(), Hash: s.hashes[i]})
	}
	writePrefabs(w, start, list)

	despawns := make([]uint32, 0, min(len(c.despawns), maxDespawnsPerPacket))
	for id := range c.despawns {
		despawns = append(despawns, id)
	}
	slices.Sort(despawns)
	despawns = despawns[:min(len(despawns), maxDespawnsPerPacket)]

	// Every relevant ghost the client lacks or whose value moved past its
	// baseline is a candidate; the rest cost nothing.
	cands := c.cands[:0]
	var scratch, data Writer
	relevant := 0
	if len(c.ghosts) < len(s.list) {
		c.ghosts = append(c.ghosts, make([]*clientGhost, len(s.list)-len(c.ghosts))...)
	}
	for slot, g := range s.list {
		if g == nil || g.typ >= c.loaded {
			continue
		}
		cg := c.ghosts[slot]
		if !s.relevantLocked(c, g, cg != nil) {
			if cg != nil {
				// Out of the client's interest: despawned for it alone.
				c.ghosts[slot] = nil
				c.despawns[g.id] = true
			}
			continue
		}
		if cg == nil && c.despawns[g.id] {
			continue // back in view: spawned once its despawn is acknowledged
		}
		relevant++
		// (A ghost with buffers the client does not hold whole, or that
		// changed since, may have some to send: buffers.go.)
		bufs := len(g.bufs) > 0 && (cg == nil || !cg.bufsDone(g))
		if cg != nil && g.changed <= cg.acked && !bufs {
			continue // unchanged since the client acknowledged it
		}
		cd := candidate{g: g, cg: cg}
		if cg != nil {
			s0, s1 := cg.baselines()
			if s0 != nil {
				if g.changed <= s0.tick && !bufs {
					continue // unchanged since the client acknowledged it
				}
				cd.t0, cd.b0 = s0.tick, &s0.b
			}
			if s1 != nil {
				cd.t1, cd.b1 = s1.tick, &s1.b
			}
		}
		age := uint64(tick - g.spawn + 1)
		if cg != nil {
			age = uint64(tick - cg.lastSent)
		}
		cd.prio = age * uint64(s.types[g.typ].importance()) * s.closeness(c, g)
		cands = append(cands, cd)
	}
	// Most urgent first: a heap of the candidates' keys, popped until the
	// packet is full (only what fits is ordered: with many changing
	// ghosts, sorting them all cost each client more than encoding).
	keys := c.keys[:0]
	for i, cd := range cands {
		keys = append(keys, candKey{prio: cd.prio, id: cd.g.id, i: int32(i)})
	}
	heapify(keys)

	// Fit what the packet holds, most urgent first; the rest waits.
	budget := s.packetBits() - w.Bits() - 64 - 32*len(despawns) - 38 - 8
	chosen := c.chosen[:0]
	misses := 0
	for len(keys) > 0 {
		// A full packet: the rest wait for the next tick without being
		// encoded (a world of many changing ghosts would otherwise cost
		// every client the encoding of all of them, every tick).
		if budget < minGhostBits || misses == maxMisses {
			break
		}
		var k candKey
		k, keys = popKey(keys)
		cd := cands[k.i]
		t := &s.types[cd.g.typ]
		codec := ghostCodec{tick: tick, t0: cd.t0, t1: cd.t1}
		var pieces []*bufPiece
		cd.spans, cd.named = nil, nil
		if len(cd.g.bufs) > 0 {
			// What fits of its buffers, in the room left beside its
			// values (at most a kilobit for those).
			room := budget - 1024
			for _, name := range slices.Sorted(maps.Keys(cd.g.bufs)) {
				var held []tier
				named, known := false, 0
				if cd.cg != nil {
					held = cd.cg.inflight(name, tick, c.window())
					if cd.b0 != nil {
						// (A ghost sent whole, its baselines gone, is taken
						// as a spawn: its scopes named again, their tables
						// of field names afresh.)
						named, known = cd.cg.names[name], cd.cg.fields[name]
					}
				}
				p, cost, spans := cd.g.bufs[name].piece(name, named, known, held, room)
				if p != nil && len(pieces) < maxBufPieces {
					pieces = append(pieces, p)
					room -= cost
					cd.spans = append(cd.spans, spans...)
					if p.name != "" || len(p.defs) > 0 {
						cd.named = append(cd.named, naming{scope: name, name: p.name != "", fields: p.defFrom + len(p.defs)})
					}
				}
			}
			if len(pieces) == 0 && cd.b0 != nil && cd.g.changed <= cd.t0 {
				continue // nothing to send after all
			}
		}
		cd.compact = cd.b0 != nil && len(pieces) == 0
		codec.compact = cd.compact
		cd.from = scratch.Bits()
		cd.mask, cd.size = codec.encode(&scratch, &data, t, cd.g.vals, cd.b0, cd.b1, pieces)
		cd.to = scratch.Bits()
		cost := cd.to - cd.from + 4 // its id and a share of the headers, about: the layout below decides
		if cd.b0 == nil {
			cost += 38 + 8 + 8*len(cd.g.object)
		}
		if cost > budget {
			scratch.truncate(cd.from) // not sent: forget its bits
			misses++
			continue
		}
		misses = 0
		budget -= cost
		chosen = append(chosen, cd)
	}

	// Chunks by type, groups by baselines, ghosts by id. The estimate
	// above is a guess at what ids and headers cost: the layout's exact
	// size decides, the least urgent ghosts leaving until it fits.
	room := s.packetBits() - w.Bits() - 64 - 32*len(despawns)
	layout := c.layout[:0]
	for {
		layout = append(layout[:0], chosen...)
		slices.SortFunc(layout, func(a, b candidate) int {
			return cmp.Or(cmp.Compare(a.g.typ, b.g.typ), cmp.Compare(b.t0, a.t0), cmp.Compare(b.t1, a.t1), cmpBool(a.compact, b.compact), cmp.Compare(a.g.id, b.g.id))
		})
		over := layoutBits(layout, tick, &scratch) - room
		if over <= 0 || len(chosen) == 0 {
			break
		}
		// (Ghosts of about the average size leave at once.)
		avg := max(1, (scratch.Bits())/max(1, len(chosen)))
		chosen = chosen[:max(0, len(chosen)-max(1, over/avg))]
	}
	c.chosen = chosen[:0]
	chosen = layout
	w.WriteBits(uint32(len(despawns)), 32)
	w.WriteBits(uint32(relevant), 32)
	for _, id := range despawns {
		w.WriteBits(id, 32)
	}
	ghostBits = writeGhosts(w, chosen, tick, &scratch)
	sn := &sent{tick: tick, ghosts: make([]int, 0, len(chosen)), ids: make([]uint32, 0, len(chosen)), despawns: despawns}
	for _, cd := range chosen {
		sn.ghosts = append(sn.ghosts, cd.g.slot)
		sn.ids = append(sn.ids, cd.g.id)
		cg := cd.cg
		if cg == nil {
			cg = &clientGhost{id: cd.g.id}
			c.ghosts[cd.g.slot] = cg
		}
		cg.add(tick, base{vals: cd.g.vals, mask: cd.mask, size: cd.size}, cd.spans, cd.named)
	}
	c.ring[tick%ringSize] = sn
	// (Scratch kept for the next tick; what it points to is overwritten
	// then.)
	c.cands, c.keys, c.layout = cands[:0], keys[:0], layout[:0]
	return len(chosen), ghostBits
}

// layoutBits is how many bits chosen, laid out (sorted), take in a
// packet: writeGhosts, counted.
func layoutBits(chosen []candidate, tick uint32, scratch *Writer) int {
	n := Writer{count: true}
	writeGhosts(&n, chosen, tick, scratch)
	return n.Bits()
}

// writeGhosts writes chosen, sorted, as a packet lays ghosts out: their
// count, then chunks by type, groups by baselines and form, ghosts by id
// (their bodies encoded in scratch). It returns the bits of the ghosts
// themselves: ids, spawns and data.
func writeGhosts(w *Writer, chosen []candidate, tick uint32, scratch *Writer) (ghostBits int) {
	w.WritePacked(uint32(len(chosen)))
	for i := 0; i < len(chosen); {
		typ := chosen[i].g.typ
		j := i
		for j < len(chosen) && chosen[j].g.typ == typ {
			j++
		}
		w.WritePacked(uint32(typ))
		w.WritePacked(uint32(j - i))
		w.WriteBool(false) // no prespawned ghosts
		for k := i; k < j; {
			m := groupEnd(chosen, k, j)
			t0, t1, compact := chosen[k].t0, chosen[k].t1, chosen[k].compact
			w.WritePacked(delta(tick, t0))
			w.WritePacked(delta(tick, t1))
			w.WritePacked(0) // a third baseline is not used
			w.WritePacked(uint32(m - k))
			if t0 != 0 {
				w.WriteBool(compact)
			}
			prev := uint32(0)
			for _, cd := range chosen[k:m] {
				at := w.Bits()
				w.WritePacked(idDelta(cd.g.id, prev, compact))
				prev = cd.g.id
				if t0 == 0 {
					w.WritePacked(tick - cd.g.spawn)
					w.writeString(cd.g.object)
				}
				w.AppendRange(scratch, cd.from, cd.to)
				ghostBits += w.Bits() - at
			}
			k = m
		}
		i = j
	}
	return ghostBits
}

// packetBits is the most a packet may hold: MaxPacket, or less under
// Options.MaxKbps.
func (s *Server) packetBits() int {
	bits := MaxPacket * 8
	if s.opts.MaxKbps > 0 && s.opts.Rate > 0 {
		bits = min(bits, s.opts.MaxKbps*1000/s.opts.Rate&^7) // (whole bytes)
	}
	return bits
}

// candKey orders candidates: higher priority first, then lower ghost id.
type candKey struct {
	prio uint64
	id   uint32
	i    int32 // in cands
}

func (a candKey) before(b candKey) bool {
	return a.prio > b.prio || (a.prio == b.prio && a.id < b.id)
}

// heapify makes h a heap whose first key comes before every other.
func heapify(h []candKey) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

// popKey returns the heap's first key and the heap without it.
func popKey(h []candKey) (candKey, []candKey) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	siftDown(h, 0)
	return top, h
}

func siftDown(h []candKey, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// groupEnd is where the group of sorted ghosts starting at k ends (at
// most at j): the ghosts after it that share its baselines and form.
func groupEnd(sorted []candidate, k, j int) int {
	m := k
	for m < j && sorted[m].t0 == sorted[k].t0 && sorted[m].t1 == sorted[k].t1 && sorted[m].compact == sorted[k].compact {
		m++
	}
	return m
}

// idDelta is how a ghost id goes in a group after prev (0 for the first):
// the difference, less one in a compact group (ids only increase, so
// consecutive ones cost the least there).
func idDelta(id, prev uint32, compact bool) uint32 {
	if compact {
		return id - prev - 1
	}
	return id - prev
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// delta is how many ticks t is before tick; 0 for no baseline.
func delta(tick, t uint32) uint32 {
	if t == 0 {
		return 0
	}
	return tick - t
}
