// Package relay runs a Solipsism node: one gameworld.World shared with many
// peer links, routed by the ownership rules of the node's role.
//
// A Node is a server (accepts downstream links, relays everything except a
// link's own objects back to it), a proxy (one upstream link toward a server
// plus downstream clients, chainable to any depth) or a client (one upstream
// link; package client wraps one as the Go client API). Servers can join a mesh
// (package cluster, through the Members seam): membership comes from package membership (hashicorp/memberlist), and each pair of
// members keeps one mesh link carrying only what is local to its sender. The same routing code serves all
// three: applied change records go to one shared log, offered once per tick
// to every ready link, and ownership.MaySend decides per link. Every incoming record is
// checked with ownership.MayAccept before it touches the world.
//
// Objects can change owner (transfer.go): a peer asks with a transfer
// record, the node grants or refuses by its ownership.Policy, and the
// transfer, stamped with the object's next ownership epoch, is routed like
// any change; concurrent claims resolve by gameworld.Beats on every node.
// Only the root of a proxy chain decides; proxies and clients pass
// requests up and answers down (answers.go), and a mesh server answers its
// asker once the other members have acknowledged the grant. Persistent
// objects fall to the node when their owner leaves.
//
// Every link between our peers proves convergence (digest.go): each side
// periodically sends the other a digest of what it sent it, and the
// buckets that differ are repaired and counted (Node.Repairs); each link's
// schedule, comparisons and repair in flight are an antientropy.Link. What the
// node accepts from its upstream and mesh members is bounded (quota.go,
// over package quota),
// and a world behind a proxy that the upstream does not grant is refused
// alone (identity.go). Work proportional to the world (a departure, a
// refresh answer, a region change over everything) is taken a slice at a
// time with the lock let go between, and a big departure reaches our
// downstream nodes as one departed message (departures.go). A scope delta
// that arrives with a gap asks its sender for the object at once, with a
// repair request (gaps.go).
//
// A node about to stop drains (drain.go): it refuses new clients, sends
// those it has to the other mesh members (TypeMoved), and the node that
// receives that as a client follows it (RunUpstream, through a message
// subscription). A member that leaves the mesh on purpose says so in its
// gossip, and the others adopt what it owned itself (closes.go).
//
// Beyond objects: ephemeral messages (messages.go) are routed by the same
// rules from the log, stamped with their sender where they enter; rooms
// (rooms.go) narrow what a peer sees like an interest region, with the
// node's presence objects (package presence, a PeerWatcher); a Validator (validate.go, the
// operator's property schemas) refuses writes that would break an
// object, telling the writer why. Scopes (an object's keyed
// sub-collections, a grid's blocks) need no rule of their own: their
// deltas ride in the records (package client has the Go writer's side), and
// quotas bound them (quota.go).
//
// Plugging in a capability. A new capability joins the node through one
// of its seams, never as another branch in the handlers of HandleWorldChange,
// HandleMetadata or the flush, nor as another field of Node:
//
//   - data riding in records: what a peer writes travels inside the change
//     records, which the node routes without looking inside (scope/'s
//     deltas; quotas bound them);
//   - a checker in Options: a Validator refuses writes, and the node tells
//     the writer why (schema/);
//   - an attachment: Attach joins a view of the world that is not a
//     Solipsism link (the Alloverse and snapshot bridges), routed by the
//     same rules as a downstream peer, with its own region;
//   - peer events: a PeerWatcher (peerwatch.go) is told when a downstream
//     peer's metadata arrives or changes and when it leaves, and answers
//     with changes to the node's own objects (package presence);
//   - the mesh: a Members (package cluster's Mesh) answers whether a
//     member is alive and admits mesh links, and tells the node of
//     members gone (MemberGone, MemberLeft);
//   - the node's own changes and messages: Apply, Publish,
//     SubscribeMessages and the world's Subscribe, as any program running
//     beside the node uses them.
//
// Where a capability needs state of its own, that state is a type of the
// capability's file (Node groups it by concern: hub, fan, sp, deps, xfer,
// up, quota, dig) or a package of its own without I/O: the spatial index,
// regions and room filter are an interest.Space, a link's anti-entropy an
// antientropy.Link, transfer requests in flight and answers held for the
// mesh's acknowledgements a transfer.Requests and transfer.Holds, what a
// link is owed under priority a priority.Plan,
// per-owner quotas a quota.Ledger; Prometheus instruments are package
// metrics'.
//
// Priority and budgets decide in the flush, per link with a region,
// which updates wait: for a link with a budget, the decision and what it
// is owed are a priority.Plan of the link's; links without one share the
// node's priority.Schedule, which folds far changes once for all of them
// and publishes them by band. The node only says which links each applies
// to and what each record's band and verdict are.
//
// Concurrency: a Node serialises applying and routing under one mutex,
// Node.mu, so every link sees changes in the same order the world applied
// them; a method whose name ends in Locked must be called with it held,
// and one without that suffix takes it itself, with n.lock. On more than
// one core, a tick's flush offers its log to most links after letting
// Node.mu go, while the next changes apply (unlocked.go); n.lock waits for
// those offers, so that whatever its holder sends a link follows them,
// and only a client's plain changes apply meanwhile. Links write on
// goroutines of their own, started while they have something to write,
// so a slow link never delays the others.
package relay
