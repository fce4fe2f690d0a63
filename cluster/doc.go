// Package cluster joins server nodes (package relay) into a mesh:
// membership and failure detection come from package membership
// (hashicorp/memberlist), and the world flows over one WebSocket link per
// pair of members, dialled by the member whose name sorts first. A Mesh is
// the node's relay.Members: the node asks it whether a member is still
// alive when a mesh link drops, and hands it the handshakes of mesh links;
// the Mesh tells the node when members come and go.
//
//	m, err := cluster.Join(node, cluster.Options{BindAddr: ":7946", AdvertiseURL: "ws://host:8080/ws"})
//
// What crosses a mesh link, and why it cannot loop, is the relay's
// (docs/architecture.md, "The mesh").
//
// Concurrency: a Mesh is safe for concurrent use. memberlist's events reach
// it one at a time on package membership's goroutine.
package cluster
