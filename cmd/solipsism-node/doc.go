// Command solipsism-node runs a Solipsism node: a server (default) or a proxy
// that relays one shared world over WebSocket.
//
// It serves the protocol at /ws, a health check at /healthz and Prometheus
// metrics at /metrics. Every flag can also be set with an environment
// variable: --read-limit is SOLIPSISM_READ_LIMIT, and so on; a flag given on
// the command line wins. Run with -h for the list.
package main
