package relay

import (
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/store"
)

// DefaultReclaimGrace is the default Options.ReclaimGrace: as long as a
// proxy's longest default reconnect backoff.
const DefaultReclaimGrace = 5 * time.Second

// Options configures a Node. The zero value is a server with defaults.
type Options struct {
	// Role is the node's role. Zero means ownership.Server.
	Role ownership.Role
	// Transfers is the policy for ownership transfers. Zero means
	// ownership.TransferMarked: objects marked "transferable": true, and
	// persistent objects, may change owner. Every node of a mesh should
	// run the same policy.
	Transfers ownership.Policy
	// Identifier is the node's world identifier. Empty means a fresh one
	// with Prefix.
	Identifier string
	// Prefix of a generated identifier. Empty means the role's name.
	Prefix string
	// Tick is how often each link flushes its queue. Zero means
	// peer.DefaultTick; peer.Immediate sends without delay.
	Tick time.Duration
	// StallTimeout, PingInterval, MaxFrameBytes, Limits, ReadRate and
	// ReadBurst are passed to every link, downstream, upstream and mesh
	// alike (see peer.LinkOptions; zero means their defaults).
	StallTimeout  time.Duration
	PingInterval  time.Duration
	MaxFrameBytes int
	Limits        peer.Limits
	ReadRate      int
	ReadBurst     int
	// MetadataTimeout closes a downstream link that has not sent its
	// metadata in time. Zero means 30 s; negative disables it.
	MetadataTimeout time.Duration
	// ReclaimGrace is how long the objects of a downstream link whose
	// connection broke (no close frame, a stall, a failed keepalive) are
	// kept for the same peer to reconnect and take them over, so that a
	// flapping link does not make them vanish and reappear for everyone. A
	// peer that closes its connection, or is closed for bad input, loses
	// them at once. Zero means DefaultReclaimGrace; negative disables it.
	ReclaimGrace time.Duration
	// Interest is the region a proxy announces to its upstream. Nil means
	// the union of its downstream peers' regions (everything if any of
	// them wants everything). A client node sets its own with
	// Node.SetInterest.
	Interest []peer.Box
	// InterestProperty is the property that locates an object for
	// interest regions. Empty means DefaultInterestProperty ("position",
	// an [x, y, z] array). Objects without it reach every region.
	InterestProperty string
	// InterestMargin grows a region for objects already in a peer's view,
	// so that objects at the edge do not flicker. Zero means
	// DefaultInterestMargin; negative means none.
	InterestMargin float64
	// Validator, if set, checks every write of a peer this node serves,
	// and its own, against property schemas (validate.go; package schema
	// makes one from a file). Nil checks nothing.
	Validator Validator
	// RoomProperty is the property that holds an object's room (a
	// string; rooms.go). Empty means DefaultRoomProperty ("room").
	RoomProperty string
	// PeerWatchers follow the node's downstream peers (peerwatch.go),
	// after the node's own presence tracker (package presence). Nil adds
	// none.
	PeerWatchers []PeerWatcher
	// InterestCell is the side of the grid cells that index objects and
	// regions. Zero means DefaultInterestCell.
	InterestCell float64
	// Auth, if set, checks the token every downstream peer presents (the
	// "token" query parameter or a bearer Authorization header): without a
	// valid one the WebSocket handshake is refused with 401, and a peer
	// whose identifierChain names an identifier its token does not grant
	// is closed with 4005. Nil means no authentication.
	Auth auth.Authenticator
	// Quotas bound what one peer may do; the zero value has the defaults
	// (see Quotas).
	Quotas Quotas
	// ResumeSecret keys the resume tokens the node hands its downstream
	// peers (see docs/security.md). Nil means the one in Store, or a
	// random one kept there (without a Store, tokens do not survive a
	// restart). Nodes of one mesh that share it accept each other's
	// tokens.
	ResumeSecret []byte
	// Store keeps the node's identifier, resume secret and durable
	// objects (those it owns, and persistent ones of the worlds behind
	// its downstream links) across restarts: New loads it before the
	// node serves anyone, and changes are written about one tick after
	// they take effect (see package store). Nil keeps nothing. The node
	// does not close it.
	Store store.Store
	// OriginPatterns lists the browser origins accepted besides the
	// node's own (see peer.AcceptOptions).
	OriginPatterns []string
	// DigestInterval is how often each link whose peer speaks anti-entropy
	// (peer.FeatureDigest: our nodes and Go clients) is sent a digest of
	// what this node has sent it, so that the peer can find and repair
	// divergence (see docs/protocol.md). Zero means
	// DefaultDigestInterval; negative turns digests off (the node still
	// answers its peers' digests).
	DigestInterval time.Duration
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// Registerer, if set, receives the node's Prometheus metrics.
	Registerer prometheus.Registerer
}

// Quotas bound what one downstream peer (a link or an attachment) may do,
// so that a hostile or careless one cannot take the node down. Writes over
// a quota are refused (and counted); a peer over a rate is read slower;
// too many connections from one address are refused with HTTP 429. Zero
// fields mean the defaults; negative ones mean no limit.
type Quotas struct {
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

func (q *Quotas) defaults() {
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
