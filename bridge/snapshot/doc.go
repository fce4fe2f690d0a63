// Package snapshot serves a node's world to game engines and embedded peers
// as compact binary snapshots over UDP, in the style of Unity's Netcode for
// Entities: a handshake that says the wire's Version and proves the
// client's address (a client of another version is refused as outdated,
// never served a wire it would mis-read), a list of ghost
// types (prefabs) the client loads, and then one packet per client per tick
// holding despawns and, per ghost type, the ghosts that changed, each
// delta-coded against the newest snapshot the client acknowledged that held
// it (and predicted from the one before), behind a change mask. Changes of
// ghosts the client holds go in compact groups, where a lane that matches
// its prediction costs one bit. A client may state its interest (a region,
// rooms: relevance.go): it then holds only the relevant ghosts, each
// despawned for it alone when it leaves and spawned again when it comes
// back, and near ghosts go first when a packet cannot hold every change.
//
// A Server joins a relay.Node through relay.Attach: one observer attachment
// feeds its ghosts, and each client is an attachment of its own whose
// commands change the objects it owns. Ownership and routing stay in relay
// and ownership.
//
// Objects map to ghost types by their "ghostType" property; objects without
// one (or naming an unknown type) use GenericType, which carries every
// property as one JSON value. A typed object's properties outside its type's
// fields are not replicated. An object's scopes (a grid's blocks) travel
// with its ghost as dynamic buffers, element by element (buffers.go).
//
// The bit packer, the packed-integer code and the compact code are written
// here: they are the protocol's own (Unity's 16-bucket code, and ours on top
// of it), and no Go library offers them.
package snapshot
