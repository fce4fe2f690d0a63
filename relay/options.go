package relay

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/quota"
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
	// Priority sends clients with a region far objects less often, and
	// bounds what each client is sent per second (priority.go); the zero
	// value turns both off.
	Priority PriorityOptions
	// Budget, for a client node, is the bytes per second of changes it
	// asks its upstream for at most (metadata "budget"); zero asks no
	// limit.
	Budget int
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

// Quotas bound what one downstream peer may do (package quota).
type Quotas = quota.Limits
