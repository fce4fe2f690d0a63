// Package client is a Go program's connection to a Solipsism world: a
// Client joins a server (directly or through proxies), owns the objects it
// creates, sees everyone else's, takes and releases ownership, sends and
// receives messages, writes scopes element by element, and follows a
// draining member to another.
//
// A Client runs a relay.Node in the client role with one upstream link
// (relay.Node.RunUpstream), so it speaks the protocol exactly as a proxy
// does toward its server: it reconnects by itself, resumes its claims, and
// answers the node's digests. What the Client does not wrap is on its
// Node.
//
// Concurrency: every method of a Client is safe for concurrent use.
// Subscribe and SubscribeMessages call their functions from the goroutine
// that applied the change, in order; those functions must not block for
// long nor call the Client's write methods.
package client
