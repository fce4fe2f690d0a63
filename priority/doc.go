// Package priority decides, for one client under priority and budgets,
// which updates go now and which wait, without I/O (docs/protocol.md,
// "Priority and budgets").
//
// A client with a region is sent the updates of objects near its centre
// every tick and those farther less often: bands of distance (see
// interest.Band), each twice as far as the one before and sent half as
// often. A client may also have a budget of bytes per second: what does
// not fit waits, the longest-waiting first. Nothing is dropped: an update
// that waits is folded into the object's later ones (a client is owed an
// object once, at its latest value), and adds, removes, transfers and
// hides never wait; what a client is owed of an object goes before any of
// them.
//
// A Plan is one client's: what it is owed, its band queues and its
// budget's tokens. The node (package relay) asks it, once a flush, which
// of the flush's records wait (Decide), and takes what is owed whole when
// priority stops applying, the client's region changes or an owner's
// message or departure must not overtake its updates (Take). A Plan
// reuses what it was owed once it is sent and out of its queues: a crowd's
// client is owed most of the world most of the time, and an allocation per
// owed update per client was most of the cost of deciding
// (BenchmarkDecideCrowd). What Decide and Take return stays valid until
// the next Decide.
//
// A Schedule is the same for every client without a budget at once: an
// object's far changes are folded once, for all its viewers, and published
// to each band on a timetable of the object's own (band b every 2^b ticks,
// every band every 2^(bands-1)), so that a crowd's far changes cost the
// node once each rather than once per client and object; a client is sent
// what is published for its band of the object.
//
// Concurrency: a Plan is not safe for concurrent use; its owner guards it
// (the node holds its lock, or offers one link's records on one
// goroutine).
package priority
