// Package peer implements links between Solipsism peers: the
// [messageType, data] JSON codec, the WebSocket transport (on
// github.com/coder/websocket), an in-memory transport for tests, the
// metadata handshake, and a per-link outbox that coalesces changes per
// object while the link is busy.
//
// A Link owns one Conn. It reads messages on the goroutine that calls Run and
// hands them, decoded and validated, to a Handler. Messages are decoded as a
// stream (github.com/go-json-experiment/json's jsontext tokenizer; the
// standard library's encoding/json cannot stream the records of one message):
// the 2016 library sends its whole world in one message, so what is bounded
// is one record, not a message. A link writes from a goroutine that exists
// only while there is something to write, so a slow peer only ever delays
// itself and an idle link costs memory only. Change records are encoded once
// (Record) and every link assembles its frames from those encoded fragments.
//
// The codec speaks both dialects of the metadata answer: the documented
// "metadata" and the "metadataChange" that the 2016 JavaScript library
// actually sends. A link answers in the dialect its peer used, and never
// sends a peer anything known to crash the JavaScript library: unknown
// message types, a remove of an id the peer was never told about, or an add
// and a remove of one id in one message.
//
// A queue that has fallen behind by a burst is sent a slice at a time,
// paced by the peer's answer to a ping, live changes first (queue.go); the
// anti-entropy messages (digest.go) go only to peers that list
// FeatureDigest, departed messages (departed.go) only to those that list
// FeatureDeparted, and ephemeral messages (message.go), bounded per link,
// only to those that list FeatureMessages. Metadata carries a peer's
// rooms (Metadata.Rooms) beside its interest. Records carry scope deltas
// (scopes.go), composed as a queue coalesces; a peer that does not list
// FeatureScopes is sent each scope whole, as a property.
package peer
