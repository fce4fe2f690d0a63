// Command solipsism-load drives a Solipsism node with many WebSocket clients
// and reports delivered change records and change-to-delivery latency.
//
// Every client owns one object and updates it --rate times a second with a
// timestamp property; every client counts the records it receives, and
// --observers of them decode each record to measure latency. It shows a
// progress line on a terminal and prints a summary table at the end: with
// --json, a line "measuring" when the measured window starts and one JSON
// report when it ends, for scripts. With --check every client keeps a copy
// of the world, and at the end, once updates stop and traffic settles, each
// copy is compared with the node's (/api/state); the tool exits with 3 if
// any differs. --token presents a token to a node with authentication on.
// With --idle the clients only connect, answer the handshake and wait,
// which is how per-connection memory is measured. --interest places the
// objects on a grid and gives each client an interest box around its own;
// --churn and --stalled add clients that join and leave all the time and
// clients that stop reading; --allo and --snapshot add Alloverse and
// snapshot clients that follow the world, write an object of their own and
// report their own latency and consistency.
//
// --scenario presets the flags for a crowd in one area, clients spread over
// a big world, rooms, or a mesh (several --url, each node a block of the
// grid, as near square as their number allows). --near splits the observers' latency into near and far
// objects, with how stale the far ones get (the age of the value shown
// when the next arrives) and how far behind (how long the value shown had
// been superseded). Every second of the measured
// window it samples the latency, the bytes per client and the nodes' CPU,
// RSS and repairs (their /metrics); --html writes all of it as a
// self-contained report with plots.
//
//	solipsism-load --url ws://127.0.0.1:8080/ws --clients 200 --rate 20 --duration 10s
package main
