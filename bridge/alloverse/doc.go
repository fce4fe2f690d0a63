// Package alloverse serves a node's world to Alloverse clients: the world as
// one revisioned JSON document of entities, sent every heartbeat as a diff
// against the revision each client last acknowledged, and written through
// Alloverse "place" interactions.
//
// A Bridge joins a relay.Node through relay.Attach: one observer attachment
// receives the world to keep the document, and each announced agent is an
// attachment of its own, with a world identifier that owns its entities.
// Ownership and routing stay in relay and ownership; the bridge only
// translates. A Session is one client, whatever carries it: Handler serves
// clients over WebSocket, and other transports (ENet) drive Sessions through
// the Conn interface.
//
// Mapping: a GameObject is an entity with the same id; each property is a
// component of the same name, with the same JSON value. A property whose
// value is null is no component: that is how a component is removed, as
// the Solipsism protocol has no property removal. An object's scope (a
// grid's blocks) is a component holding an object of its elements, kept and
// diffed element by element; an agent's change_components of it, its
// elements whole, reaches the node as the delta of what differs. Owners
// stay server-side.
//
// Revisions: the document's revision is bumped once per heartbeat in which
// the world changed, so a revision names one world state, the same for
// every client, and bumped with the document unchanged when a client must
// be sent its state again (unacknowledged within a few heartbeats) or
// revision 0 would be sent: no client gets the same revision twice, which
// allonet takes for a broken place. After MaxRevision (2^53) it wraps to
// 0. An acknowledgement of 0 always asks for a full set.
//
// allonet clients announce version 3 or 4 (others are refused with its
// own 1003 answer); over ENet, the channel layout (LayoutV3, LayoutV4)
// follows the channel count a client connects with.
//
// Diffs are built from per-revision change sets, in time proportional to
// what changed since the client's base, not by comparing documents. Merge
// patches (RFC 7396) are built here because merge cannot express every
// change (a null member, keys removed from an object-valued component) and
// a library diff of whole documents is what this avoids. RFC 6902
// patches are applied (by Client) with github.com/evanphx/json-patch/v5,
// except the "test" operation, which that library gets wrong in edge
// cases (empty keys, leading zeros, a missing value); it is evaluated
// here. Merge patches are applied here too: the library's cost grows with
// the square of an object's members (see MergePatch).
package alloverse
