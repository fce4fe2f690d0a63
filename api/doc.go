// Package api is a node's HTTP API beside the protocol: the inspector's
// state (GET /api/state) and a backend's messages (POST /api/messages),
// as handlers over a relay.Node, and ReadOnly for endpoints that show
// state. The binary mounts them behind the admin token; relay itself
// serves only the protocol.
package api
