package quota

import "math"

// Limits bound what one downstream peer (a link or an attachment) may do,
// so that a hostile or careless one cannot take the node down. Writes over
// a quota are refused (and counted); a peer over a rate is read slower;
// too many connections from one address are refused with HTTP 429. Zero
// fields mean the defaults; negative ones mean no limit.
type Limits struct {
	// ConnectionsPerIP: downstream WebSocket links from one address.
	// Default 256.
	ConnectionsPerIP int
	// MessagesPerSecond and RecordsPerSecond per link. Defaults 500 and
	// 120,000 (two writers of 1,000 objects at 60 Hz).
	MessagesPerSecond, RecordsPerSecond float64
	// ObjectsPerOwner: objects one world identifier may own on this node.
	// Default 100,000.
	ObjectsPerOwner int
	// PropertiesPerObject, ValueBytes (one property value) and
	// ObjectBytes (all of an object's properties). Defaults 1,024, 256 KiB
	// and 4 MiB.
	PropertiesPerObject, ValueBytes, ObjectBytes int
	// WorldObjects and WorldBytes bound what the node accepts from its
	// upstream and its mesh members, whose worlds no per-owner quota
	// covers: their new objects are refused once the world holds
	// WorldObjects objects, and their writes that would take the world's
	// properties (names and values) past WorldBytes. The per-object quotas
	// apply to them too. Defaults 500,000 and 256 MiB (a node then stays
	// within about 1 GiB).
	WorldObjects int
	WorldBytes   int64
	// ScopeElements and ScopeBytes bound one scope of an object: its
	// elements, and the bytes of its JSON object (what a peer that knows
	// no scopes is sent as one property, within one record). Defaults
	// 65,536 and 896 KiB.
	ScopeElements, ScopeBytes int
}

// Defaults sets the zero fields to their defaults and the negative ones
// to no limit.
func (q *Limits) Defaults() {
	def := func(v *int, d int) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = math.MaxInt
		}
	}
	deff := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0 // unlimited for the link
		}
	}
	def(&q.ConnectionsPerIP, 256)
	deff(&q.MessagesPerSecond, 500)
	deff(&q.RecordsPerSecond, 120000)
	def(&q.ObjectsPerOwner, 100000)
	def(&q.PropertiesPerObject, 1024)
	def(&q.ValueBytes, 256<<10)
	def(&q.ObjectBytes, 4<<20)
	def(&q.WorldObjects, 500000)
	def(&q.ScopeElements, 1<<16)
	def(&q.ScopeBytes, 896<<10)
	switch {
	case q.WorldBytes == 0:
		q.WorldBytes = 256 << 20
	case q.WorldBytes < 0:
		q.WorldBytes = math.MaxInt64
	}
}
