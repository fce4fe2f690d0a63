// Package wiretest provides a raw wire-protocol peer for tests: a real
// WebSocket client that speaks [type,data] JSON like the 2016 JavaScript
// library, keeps a view of the world it is told about, and records every
// message that would have crashed that library.
package wiretest
