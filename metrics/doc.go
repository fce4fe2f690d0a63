// Package metrics is a node's Prometheus instruments: what the node
// observes as it works (Recorder) and what it counts, summed at scrape time
// (Collector over a Source). The relay feeds both and knows nothing of
// Prometheus beyond handing a Registerer here.
//
// Concurrency: a Recorder's methods are safe for concurrent use and cheap
// (the relay calls some with its lock held); a nil *Recorder records
// nothing. Totals is not safe for concurrent use: its owner guards it.
package metrics
