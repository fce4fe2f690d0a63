package priority

import (
	"math/bits"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// Schedule sends far updates on one timetable shared by every client
// without a budget, so that what a crowd's clients are owed costs the node
// once per object, not once per object and client.
//
// An object's placed updates are folded into one pending record, once for
// all its viewers. Each tick publishes some pending objects to some bands:
// an object is published to bands 1 to m, where m counts the trailing zero
// bits of the tick plus the object's phase (so band b every 2^b ticks), and
// to every band, 0 included, every 2^(bands-1) ticks, after which its
// pending record starts again; a band that has had every change folded in
// is left out. A client is sent a published object if its
// band for the object is within those published to. So a viewer in band
// b gets each change within 2^b ticks, every viewer within 2^(bands-1)
// whatever its band did meanwhile (every band is published to at that
// tick), and what each is sent is the object's changes since the last
// publication to every band: it covers all the viewer had not had, and is
// never older than what it had.
//
// Any other record of an object (an add, a remove, a transfer) goes to its
// viewers at once and carries the object whole, or removes it: what was
// pending of it is dropped. An update of an object without a position goes
// at once too, and is folded into the pending record, which is then
// published to every band in the same tick (it may hold properties the
// update does not name).
//
// S is what the node keeps of an object's place with its pending record
// (relay keeps its position and room). A Schedule is not safe for
// concurrent use, except that Pending and what Next returned may be read
// by several goroutines at once while nothing else is called.
type Schedule[S any] struct {
	bands   int
	tick    uint64
	pending map[uint32]*pend[S] // by slot
	owners  map[string]map[uint32]*pend[S]
	due     []Due[S]
}

type pend[S any] struct {
	Due[S]
	force bool // published to every band at the next tick
	// changed is the tick of the last change folded in; pub[b], the last
	// tick the record was published to band b. A band that has had every
	// change is not sent it again: an object that changes every fourth
	// tick goes to its band-1 viewers every fourth, not every second.
	changed uint64
	pub     []uint64
}

// Due is an object's pending record as a tick publishes it.
type Due[S any] struct {
	Rec   *peer.Record
	Place S
	// Min and Max are the nearest and farthest bands from 1 published
	// to (none if Min > Max); Zero says band 0 is too, which happens
	// only at a tick that publishes to every band (All).
	Min, Max  int
	Zero, All bool
}

// NewSchedule returns a schedule for bands bands (at least 1).
func NewSchedule[S any](bands int) *Schedule[S] {
	return &Schedule[S]{bands: max(bands, 1), pending: map[uint32]*pend[S]{}, owners: map[string]map[uint32]*pend[S]{}}
}

// Len returns how many objects have changes pending.
func (s *Schedule[S]) Len() int { return len(s.pending) }

// Note takes one record of a flush, in order. placed says whether the
// object has a position after it, and place is what the caller keeps of
// it.
func (s *Schedule[S]) Note(rec *peer.Record, placed bool, place S) {
	p := s.pending[rec.Slot]
	if rec.Type != gameworld.Update {
		if p != nil {
			s.drop(p)
		}
		return
	}
	if p == nil {
		p = &pend[S]{Due: Due[S]{Rec: rec}, pub: make([]uint64, s.bands)}
		s.pending[rec.Slot] = p
		s.own(p)
	} else {
		if p.Rec.Owner != rec.Owner {
			s.disown(p)
			p.Rec = peer.Coalesce(p.Rec, rec)
			s.own(p)
		} else {
			p.Rec = peer.Coalesce(p.Rec, rec)
		}
	}
	p.Place, p.changed = place, s.tick+1
	if !placed {
		p.force = true
	}
}

// Next begins the next tick and returns the objects it publishes, valid
// until End.
func (s *Schedule[S]) Next() []Due[S] {
	s.tick++
	clear(s.due)
	s.due = s.due[:0]
	top := s.bands - 1
	period := uint64(1) << top
	for slot, p := range s.pending {
		m, all := top, true
		if !p.force {
			x := (s.tick + phase(slot)) & (period - 1)
			if x != 0 {
				m, all = bits.TrailingZeros64(x), false
			}
		}
		// Bands from 1 are published to less often the farther they
		// are, so those that lack a change are the farthest ones.
		zero := all && p.pub[0] < p.changed
		lo := 1
		for lo <= m && p.pub[lo] >= p.changed {
			lo++ // had it
		}
		if lo > m && !zero {
			if all {
				s.drop(p) // every band had every change: nothing pending
			}
			continue
		}
		for b := lo; b <= m; b++ {
			p.pub[b] = s.tick
		}
		if zero {
			p.pub[0] = s.tick
		}
		p.Min, p.Max, p.Zero, p.All = lo, m, zero, all
		s.due = append(s.due, p.Due)
	}
	return s.due
}

// End ends the tick Next began: what was published to every band is no
// longer pending.
func (s *Schedule[S]) End() {
	for _, d := range s.due {
		if d.All {
			if p := s.pending[d.Rec.Slot]; p != nil {
				s.drop(p)
			}
		}
	}
	clear(s.due)
	s.due = s.due[:0]
}

// Pending calls fn with the pending record of every object of owner, or
// of every object if owner is "".
func (s *Schedule[S]) Pending(owner string, fn func(rec *peer.Record, place S)) {
	m := s.pending
	if owner != "" {
		for _, p := range s.owners[owner] {
			fn(p.Rec, p.Place)
		}
		return
	}
	for _, p := range m {
		fn(p.Rec, p.Place)
	}
}

// phase spreads objects over the ticks: those published to every band in
// one tick are about one in 2^(bands-1).
func phase(slot uint32) uint64 { return uint64(slot) * 0x9E3779B1 >> 7 }

func (s *Schedule[S]) own(p *pend[S]) {
	o := s.owners[p.Rec.Owner]
	if o == nil {
		o = map[uint32]*pend[S]{}
		s.owners[p.Rec.Owner] = o
	}
	o[p.Rec.Slot] = p
}

func (s *Schedule[S]) disown(p *pend[S]) {
	if o := s.owners[p.Rec.Owner]; o != nil {
		delete(o, p.Rec.Slot)
		if len(o) == 0 {
			delete(s.owners, p.Rec.Owner)
		}
	}
}

func (s *Schedule[S]) drop(p *pend[S]) {
	s.disown(p)
	delete(s.pending, p.Rec.Slot)
}
