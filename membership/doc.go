// Package membership is who is in a mesh of servers, and how they know:
// hashicorp/memberlist's gossip and failure detection, with each member's
// identifier and WebSocket URL in its node metadata. It knows nothing of
// worlds: package cluster keeps one WebSocket link per pair of members
// (served by package relay) and reacts to the events told here.
//
// Concurrency: a Membership's methods are safe for concurrent use. Events
// are told one at a time, in order, from the membership's own goroutine
// (memberlist forbids blocking in its callbacks, so they are queued); an
// Events implementation may call the Membership's methods but must not
// block for long.
package membership
