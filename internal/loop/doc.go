// Package loop runs a node's periodic jobs: Every calls a function on a
// ticker until a context ends; EveryWhileBusy also sleeps, without
// wake-ups, after a call that found nothing to do, until Wake.
//
// The relay's digests, the node's reclaim and revision checks and the
// bridges' heartbeats use it. It is written here, a few lines over
// time.Ticker, because no library offers a ticker that stops while idle
// and starts again on demand.
package loop
