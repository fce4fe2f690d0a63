// Package test holds tests that span processes and parts: the
// solipsism-node binary driven over the network, multi-node topologies and
// interop with 2016-style peers.
package test
