// Package presence keeps who is in a room, as objects: for each room a
// peer announces, an object of that room owned by the node the peer
// reached, {"room": room, "presence": world, "since": ms}. It goes wherever
// the room's objects go, so everyone in the room sees who is there, and
// goes away when the peer leaves the room or the node.
//
// Tracker is a relay.PeerWatcher: the node tells it when a downstream
// peer's metadata arrives or changes and when the peer leaves, and applies
// the changes it returns as the node's own. It does no I/O and keeps only
// the ids it made, by peer and room.
//
// Concurrency: a Tracker is not safe for concurrent use; the node calls it
// under its own lock, one event at a time.
package presence
