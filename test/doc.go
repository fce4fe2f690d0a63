// Package test holds tests that span processes and parts: the
// solipsism-node binary driven over the network, multi-node topologies and
// interop with 2016-style peers.
//
// Helpers that more than one test file uses live in the harness files:
// harness_test.go (node processes, endpoints, waiting), harness_world_test.go
// (worlds compared), harness_bench_test.go (benchmarks: pinned processes, the
// load tool, /proc), harness_browser_test.go (Chromium) and
// harness_lineproc_test.go (the Godot and C# programs, a line per event). Raw protocol
// peers, lossy and slow links and busy cores are internal/wiretest's.
package test
