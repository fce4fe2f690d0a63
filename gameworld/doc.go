// Package gameworld is the world model of the Solipsism protocol: a World
// holds GameObjects, each with an id, an owner (the identifier of the world
// that created it) and properties kept as raw JSON values.
//
// The package does no I/O. Changes are applied with World.Apply, which
// follows the rules of the wire protocol and of the 2016 JavaScript library:
// an add for an existing id is a property update that never changes the
// owner, an update carries a partial property map, an update or remove of an
// unknown id is ignored and reported, and an add followed by a remove of the
// same id in one batch cancels out.
//
// Every applied record advances a monotonically increasing world revision and
// the object's own version, so that views of the world (bridges, inspectors)
// can track what changed instead of comparing whole documents.
//
// Working out what an update changes reads only its object: World.Prepare
// does it ahead of Apply, without blocking it, for a caller that holds a
// lock of its own around Apply (a relay node's); Apply takes what was
// prepared while the object is still at that version.
//
// Properties are not a Go map but one immutable string per object (see
// Properties): a world holds many small objects, and a map of three
// properties alone takes about 400 bytes, where the whole object (its
// properties, its entry in the world and its slot's digest) takes about
// 250. No library offers an immutable sorted string-keyed set of raw JSON
// values, so the package writes its own, with its fuzz test.
package gameworld
