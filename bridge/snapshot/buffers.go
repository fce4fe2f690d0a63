package snapshot

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/solipsism/mesh/scope"
)

// Dynamic buffers: an object's scopes (a grid's blocks, see
// docs/protocol.md) travel with its ghost, element by element. The server
// keeps each scope's elements and a log of which changed at which tick;
// what a client holds of a scope is described, per acknowledged send, by
// tiers: ranges of element ids (in byte order) and the tick each range is
// complete as of (0: the client holds nothing there). A send carries, in
// id order and as far as the packet's room allows, what changed in each
// range since its tier's tick, or the range whole (cleared first) where
// the log no longer reaches back or the client holds nothing: a grid of
// many blocks fills over several ticks, and one block's change costs that
// block.

// maxLog bounds a buffer's change log: past it, the older half goes, and
// a client whose tier is older gets its range whole.
const maxLog = 4096

// gbuf is one scope of a ghost, on the server.
type gbuf struct {
	elems map[string][]byte // element id to its fields, a compact JSON object
	ids   []string          // the ids sorted; nil when stale
	log   []logEntry        // the changes, in tick order
	// logFrom is a tick such that every change after it is in log.
	logFrom uint32
	// index numbers the scope within its ghost, in the order they came:
	// a send names it by index once the client has acknowledged its name.
	index int
	// names are the field names its elements have had, numbered in the
	// order they came (nameIdx): fields go by number, the names with the
	// scope until a client has acknowledged them.
	names   []string
	nameIdx map[string]int
}

// learn numbers the field names of f it has not seen.
func (b *gbuf) learn(f scope.Fields) {
	for k := range f {
		if _, ok := b.nameIdx[k]; !ok && len(b.names) < maxFieldNames {
			if b.nameIdx == nil {
				b.nameIdx = map[string]int{}
			}
			b.nameIdx[k] = len(b.names)
			b.names = append(b.names, k)
		}
	}
}

type logEntry struct {
	tick uint32
	id   string
}

// applyScopes takes a delivery's scope changes into the ghost's buffers at
// tick, and reports whether any changed.
func (g *ghost) applyScopes(deltas map[string]scope.Delta, tick uint32) bool {
	changed := false
	for name, d := range deltas {
		if g.bufs == nil {
			g.bufs = map[string]*gbuf{}
		}
		b := g.bufs[name]
		if b == nil {
			b = &gbuf{elems: map[string][]byte{}, logFrom: tick - 1, index: len(g.bufs)}
			g.bufs[name] = b
		}
		set := func(id string, v []byte) {
			old, had := b.elems[id]
			switch {
			case v == nil && !had, had && string(old) == string(v):
				return
			case v == nil:
				delete(b.elems, id)
				b.ids = nil
			default:
				if !had {
					b.ids = nil
				}
				b.elems[id] = v
			}
			b.log = append(b.log, logEntry{tick, id})
			changed = true
		}
		if d.Full {
			for id := range b.elems {
				if _, keep := d.Added[id]; !keep {
					set(id, nil)
				}
			}
		}
		for _, id := range d.Removed {
			set(id, nil)
		}
		for id, f := range d.Added {
			b.learn(f)
			set(id, encodeFields(f))
		}
		for id, f := range d.Modified {
			cur := scope.Fields{}
			if old, ok := b.elems[id]; ok {
				json.Unmarshal(old, &cur) //nolint:errcheck // encoded here
			}
			for k, v := range f {
				cur[k] = v
			}
			b.learn(f)
			set(id, encodeFields(cur))
		}
		if len(b.log) > maxLog {
			cut := len(b.log) / 2
			// (Entries of one tick stay together: logFrom is a tick.)
			for cut < len(b.log) && b.log[cut].tick == b.log[cut-1].tick {
				cut++
			}
			b.logFrom = b.log[cut-1].tick
			b.log = slices.Clone(b.log[cut:])
		}
	}
	return changed
}

// encodeFields encodes an element's fields as a JSON object, keys sorted.
func encodeFields(f scope.Fields) []byte {
	b, _ := json.Marshal(f) // (maps are encoded with sorted keys; values are JSON)
	return b
}

func (b *gbuf) sorted() []string {
	if b.ids == nil {
		b.ids = make([]string, 0, len(b.elems))
		for id := range b.elems {
			b.ids = append(b.ids, id)
		}
		slices.Sort(b.ids)
	}
	return b.ids
}

// tier is a range of element ids, (the previous tier's end, end], that a
// client holds complete as of tick (0: nothing). The last tier's end is
// "" and means no end; the first tier starts before every id.
type tier struct {
	end  string
	tick uint32
}

// span is a range of element ids (lo, end] of one scope: lo "" with first
// set is no start, end "" no end.
type span struct {
	name, lo, end string
	first         bool
	// base is the tick as of which the send took the client to hold the
	// span, its changes since then sent: 0 for a span sent whole.
	base uint32
}

// heldAsOf returns the oldest tick as of which ts holds the parts of sp
// (0: some part not at all).
func heldAsOf(ts []tier, sp span) uint32 {
	if len(ts) == 0 {
		return 0
	}
	oldest := ^uint32(0)
	start, bounded := "", false // the tier is (start, end]
	for _, t := range ts {
		below := !bounded || sp.end == "" || start < sp.end
		above := sp.first || t.end == "" || sp.lo < t.end
		if below && above {
			oldest = min(oldest, t.tick)
		}
		start, bounded = t.end, true
	}
	return oldest
}

// covers reports whether id is in the span.
func (sp span) covers(id string) bool {
	return (sp.first || id > sp.lo) && (sp.end == "" || id <= sp.end)
}

// mark records that the client holds sp complete as of tick, in ts.
func mark(ts []tier, sp span, tick uint32) []tier {
	if len(ts) == 0 {
		ts = []tier{{end: "", tick: 0}}
	}
	// The elementary ranges between every boundary, each with the tick
	// of the tier it lies in, raised where sp covers it.
	var points []string
	for _, t := range ts {
		if t.end != "" {
			points = append(points, t.end)
		}
	}
	if !sp.first {
		points = append(points, sp.lo)
	}
	if sp.end != "" {
		points = append(points, sp.end)
	}
	slices.Sort(points)
	points = slices.Compact(points)
	var out []tier
	ti := 0
	for i := 0; i <= len(points); i++ {
		end := ""
		if i < len(points) {
			end = points[i]
		}
		for ts[ti].end != "" && (end == "" || ts[ti].end < end) {
			ti++
		}
		at := ts[ti].tick
		inside := (sp.first || (i > 0 && points[i-1] >= sp.lo)) && (sp.end == "" || (end != "" && end <= sp.end))
		if inside {
			at = max(at, tick)
		}
		if n := len(out); n > 0 && out[n-1].tick == at {
			out[n-1].end = end
			continue
		}
		out = append(out, tier{end: end, tick: at})
	}
	return out
}

// complete reports whether ts holds all of buffer b.
func (b *gbuf) complete(ts []tier) bool {
	if len(ts) == 0 {
		return len(b.elems) == 0 && len(b.log) == 0
	}
	for _, t := range ts {
		if t.tick == 0 || t.tick < b.logFrom {
			return false
		}
	}
	return true
}

// bufEntry is one element of a send: its fields, or nil for a removal.
// A client reads refs, then names them into fields.
type bufEntry struct {
	id     string
	fields []byte
	refs   []fieldRef
	// wire is where the server encoded its fields in its piece's wire.
	wire [2]int
}

// bufPiece is what a send carries of one scope: its index, and its name
// until the client has it.
type bufPiece struct {
	index   int
	name    string
	clears  [][2]string // ranges (from, to] to drop first; "" from: from the start, "" to: to the end
	entries []bufEntry
	// defs are field names numbered from defFrom on, which the client is
	// not known to have; idx numbers every name (the server's).
	defFrom int
	defs    []string
	idx     map[string]int
	// table is, on a client, the scope's field names after the piece.
	table []string
	// wire holds, on the server, its entries' fields encoded.
	wire Writer
}

// piece works out what a send carries of buffer b for a client that
// holds ts (acknowledged), within budget bits: in id order, what changed
// in each range since its tier's tick, or the range whole (cleared first)
// where the client holds nothing or the log no longer reaches back. It
// returns the piece (nil: nothing to send), its cost in bits and the
// spans the client will hold complete as of this send once it has it.
func (b *gbuf) piece(name string, named bool, known int, ts []tier, budget int) (*bufPiece, int, []span) {
	if len(ts) == 0 {
		ts = []tier{{end: "", tick: 0}}
	}
	p := &bufPiece{index: b.index, idx: b.nameIdx}
	cost := 16
	if !named {
		p.name = name
		cost += 8 + 8*len(name)
	}
	if known < len(b.names) {
		p.defFrom, p.defs = known, b.names[known:]
		cost += packedBits(uint32(known)) + packedBits(uint32(len(p.defs)))
		for _, d := range p.defs {
			cost += packedBits(uint32(len(d))) + 8*len(d)
		}
	}
	var spans []span
	lo, first := "", true
	for _, t := range ts {
		var cands []string
		whole := t.tick == 0 || t.tick < b.logFrom
		sp := span{name: name, lo: lo, end: t.end, first: first}
		if !whole {
			sp.base = t.tick
		}
		lo, first = t.end, false
		if whole {
			ids := b.sorted()
			i := 0
			if !sp.first {
				i = sort.SearchStrings(ids, sp.lo)
				if i < len(ids) && ids[i] == sp.lo {
					i++
				}
			}
			for ; i < len(ids) && sp.covers(ids[i]); i++ {
				cands = append(cands, ids[i])
			}
			cost += 16 + 8*(len(sp.lo)+len(sp.end))
		} else {
			seen := map[string]bool{}
			at := sort.Search(len(b.log), func(i int) bool { return b.log[i].tick > t.tick })
			for _, e := range b.log[at:] {
				if !seen[e.id] && sp.covers(e.id) {
					seen[e.id] = true
					cands = append(cands, e.id)
				}
			}
			slices.Sort(cands)
		}
		// As many as fit, in id order; the span then ends at the last.
		// (Each element's fields are encoded once, here: what it costs,
		// and what write copies.)
		n := 0
		var ranges [][2]int
		for _, id := range cands {
			from := p.wire.Bits()
			if f := b.elems[id]; f != nil {
				writeFields(&p.wire, f, b.nameIdx)
			}
			c := packedBits(uint32(len(id))) + 8*len(id) + 1 + p.wire.Bits() - from
			if cost+c > budget {
				p.wire.truncate(from)
				break
			}
			cost += c
			ranges = append(ranges, [2]int{from, p.wire.Bits()})
			n++
		}
		cut := n < len(cands)
		if cut {
			if n == 0 {
				break
			}
			sp.end = cands[n-1]
		}
		if whole {
			p.clears = append(p.clears, [2]string{sp.lo, sp.end})
		}
		for i, id := range cands[:n] {
			p.entries = append(p.entries, bufEntry{id: id, fields: b.elems[id], wire: ranges[i]})
		}
		spans = append(spans, sp)
		if cut {
			break
		}
	}
	if len(p.clears) == 0 && len(p.entries) == 0 {
		return nil, 0, spans
	}
	if len(p.entries) == 0 {
		p.defs = nil // (only entries use them)
	}
	return p, cost, spans
}

// write encodes a piece: index, name (a bit, then its bytes if set),
// field names (a bit, then the first one's number, their count and the
// names if set), clears (from, to), entries (id, present, fields).
func (p *bufPiece) write(w *Writer) {
	w.WritePacked(uint32(p.index))
	w.WriteBool(p.name != "")
	if p.name != "" {
		w.WriteBytes([]byte(p.name))
	}
	w.WriteBool(len(p.defs) > 0)
	if len(p.defs) > 0 {
		w.WritePacked(uint32(p.defFrom))
		w.WritePacked(uint32(len(p.defs)))
		for _, d := range p.defs {
			w.WriteBytes([]byte(d))
		}
	}
	w.WritePacked(uint32(len(p.clears)))
	for _, c := range p.clears {
		w.WriteBytes([]byte(c[0]))
		w.WriteBytes([]byte(c[1]))
	}
	w.WritePacked(uint32(len(p.entries)))
	for _, e := range p.entries {
		w.WriteBytes([]byte(e.id))
		w.WriteBool(e.fields != nil)
		switch {
		case e.fields == nil:
		case e.wire[1] > e.wire[0]:
			w.AppendRange(&p.wire, e.wire[0], e.wire[1])
		default: // (a piece made by hand)
			writeFields(w, e.fields, p.idx)
		}
	}
}

// resolve names the fields of a piece read by a client from table, the
// client's field names of the piece's scope as the piece extends them; it
// returns the table after the piece.
func (p *bufPiece) resolve(table []string) ([]string, error) {
	if len(p.defs) > 0 {
		if p.defFrom > len(table) {
			return nil, fmt.Errorf("%w: field names from %d where the client has %d", ErrBadPacket, p.defFrom, len(table))
		}
		t := make([]string, 0, p.defFrom+len(p.defs))
		table = append(append(t, table[:p.defFrom]...), p.defs...)
	}
	for i := range p.entries {
		e := &p.entries[i]
		if e.fields == nil {
			continue
		}
		f, err := resolveFields(e.refs, table)
		if err != nil {
			return nil, err
		}
		e.fields, e.refs = f, nil
	}
	return table, nil
}

// maxBufPieces bounds the scopes one ghost carries in a packet;
// maxScopesPerGhost the scopes a ghost may have.
const (
	maxBufPieces      = 16
	maxScopesPerGhost = 1024
)

// readPiece decodes a piece.
func readPiece(r *Reader) (bufPiece, error) {
	var p bufPiece
	p.index = int(r.ReadPacked())
	if r.ReadBool() {
		if p.name = string(r.ReadBytes(MaxStringBytes)); p.name == "" {
			return p, fmt.Errorf("%w: a buffer's name", ErrBadPacket)
		}
	}
	if p.index >= maxScopesPerGhost {
		return p, fmt.Errorf("%w: buffer index %d", ErrBadPacket, p.index)
	}
	if r.ReadBool() {
		from, n := r.ReadPacked(), r.ReadPacked()
		if r.Err() != nil || int64(from)+int64(n) > maxFieldNames || int64(n)*2 > int64(r.Remaining()) {
			return p, fmt.Errorf("%w: a buffer's field names", ErrBadPacket)
		}
		p.defFrom = int(from)
		for range n {
			d := r.ReadBytes(MaxStringBytes)
			if r.Err() != nil || !utf8.Valid(d) {
				return p, fmt.Errorf("%w: a buffer's field names", ErrBadPacket)
			}
			p.defs = append(p.defs, string(d))
		}
	}
	nc := r.ReadPacked()
	if r.Err() != nil || int64(nc)*4 > int64(r.Remaining()) {
		return p, fmt.Errorf("%w: a buffer's clears", ErrBadPacket)
	}
	for range nc {
		from, to := string(r.ReadBytes(MaxStringBytes)), string(r.ReadBytes(MaxStringBytes))
		p.clears = append(p.clears, [2]string{from, to})
	}
	ne := r.ReadPacked()
	if r.Err() != nil || int64(ne)*3 > int64(r.Remaining()) {
		return p, fmt.Errorf("%w: a buffer's entries", ErrBadPacket)
	}
	for range ne {
		e := bufEntry{id: string(r.ReadBytes(MaxStringBytes))}
		if r.ReadBool() {
			refs, err := readFields(r)
			if err != nil {
				return p, err
			}
			e.refs = refs
			e.fields = []byte{} // present: named once its table is known
		}
		if r.Err() != nil {
			break
		}
		if e.id == "" {
			return p, fmt.Errorf("%w: a buffer entry", ErrBadPacket)
		}
		p.entries = append(p.entries, e)
	}
	if r.Err() != nil {
		return p, fmt.Errorf("%w: a buffer", ErrBadPacket)
	}
	return p, nil
}
