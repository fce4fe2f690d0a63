package test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/bridge/snapshot"
)

// wireCounter counts what a raw client receives: messages, and their
// bytes as WebSocket frames (payload and header).
type wireCounter struct {
	msgs, bytes atomic.Int64
	mu          sync.Mutex
	seen        []byte // the last message, for waits
}

func (w *wireCounter) count(b []byte) {
	hdr := int64(2)
	switch {
	case len(b) >= 1<<16:
		hdr = 10
	case len(b) >= 126:
		hdr = 4
	}
	w.msgs.Add(1)
	w.bytes.Add(int64(len(b)) + hdr)
	w.mu.Lock()
	w.seen = append(w.seen[:0], b...)
	w.mu.Unlock()
}

// has reports whether the last message holds every one of s.
func (w *wireCounter) has(s ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range s {
		if !bytes.Contains(w.seen, []byte(s)) {
			return false
		}
	}
	return true
}

func (w *wireCounter) reset() { w.msgs.Store(0); w.bytes.Store(0) }

// send writes one worldChange of the given records.
func send(tb testing.TB, c *websocket.Conn, recs []string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := `["worldChange",{"timestamp":1,"changes":[` + strings.Join(recs, ",") + `]}]`
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		tb.Fatal(err)
	}
}

// blockRecords returns the records that make a world of grids of side³
// blocks: as one object per grid with a scope of blocks (scoped), or as
// one object per block.
func blockRecords(owner string, grids, side int, scoped bool) []string {
	var out []string
	for g := range grids {
		if scoped {
			var sb strings.Builder
			fmt.Fprintf(&sb, `{"type":"add","id":"grid-%d","owner":%q,"properties":{"position":[%d,0,0]},"scopes":{"blocks":{"ver":1,"added":{`, g, owner, g*side)
			for i := range side * side * side {
				if i > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `"%d,%d,%d":{"c":%d}`, i%side, i/side%side, i/side/side, i%16)
			}
			sb.WriteString(`}}}}`)
			out = append(out, sb.String())
			continue
		}
		for i := range side * side * side {
			out = append(out, fmt.Sprintf(`{"type":"add","id":"b-%d-%d,%d,%d","owner":%q,"properties":{"c":%d}}`, g, i%side, i/side%side, i/side/side, owner, i%16))
		}
	}
	return out
}

// blockChange is the record that sets block i of grid g to colour c.
func blockChange(owner string, g, side, i, c int, scoped bool) string {
	if scoped {
		return fmt.Sprintf(`{"type":"update","id":"grid-%d","scopes":{"blocks":{"ver":0,"modified":{"%d,%d,%d":{"c":%d}}}}}`, g, i%side, i/side%side, i/side/side, c)
	}
	return fmt.Sprintf(`{"type":"update","id":"b-%d-%d,%d,%d","owner":%q,"properties":{"c":%d}}`, g, i%side, i/side%side, i/side/side, owner, c)
}

const blockNodeArgs = "--tick 50ms --max-records-per-sec -1 --max-msgs-per-sec -1 --max-objects-per-owner -1 --max-conns-per-ip -1 --debug-listen 127.0.0.1:0"

// BenchmarkScopesOneBlock: a grid of 32×32×32 blocks, one block changed
// per tick (50 ms), on a node of its own process: the bytes per change a
// client receives on the WebSocket wire (frames, header included) when it
// takes scopes and when it does not (the grid whole each time), and the
// node's RSS per block: what each block of three more grids adds
// (node-rss-bytes/block), and what the first grid cost, one-time costs
// of a node's first grid included (node-rss-bytes/block-first-grid);
// beside the same world as one object per block.
//
//	go test ./test -run '^$' -bench ScopesOneBlock -benchtime 1x
func BenchmarkScopesOneBlock(b *testing.B) {
	const side, changes = 32, 100
	const blocks = side * side * side
	for range b.N {
		for _, scoped := range []bool{true, false} {
			name := map[bool]string{true: "scope", false: "objects"}[scoped]
			udp := freeUDPAddr(b)
			node := startNodeProc(b, append(strings.Fields(blockNodeArgs), "--snapshot-listen", udp)...)
			var takes, legacy wireCounter
			rawClientWith(b, node.url(), "watch-00000000-00000001", `,"features":["scopes"]`, takes.count)
			legacyConn := rawClient(b, node.url(), "watch-00000000-00000002", legacy.count)
			time.Sleep(time.Second)
			_, rss0 := procUsage(b, node.pid)
			const owner = "fill-00000000-00000000"
			w := rawClient(b, node.url(), owner, nil)
			recs := blockRecords(owner, 1, side, scoped)
			for i := 0; i < len(recs); i += 1000 {
				send(b, w, recs[i:min(len(recs), i+1000)])
			}
			last := map[bool]string{true: `"31,31,31":{"c":15}`, false: `"b-0-31,31,31"`}[scoped]
			deadline := time.Now().Add(time.Minute)
			for !takes.has(last) || !legacy.has(last) {
				if time.Now().After(deadline) {
					b.Fatal("the watchers did not get the grid")
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(8 * time.Second) // settled: the node's reclaimer checks every 2 s
			_, rss1 := procUsage(b, node.pid)
			// Three more grids, on a node settled with one: what each
			// block adds.
			heap1 := nodeMetric(b, node, "go_memstats_heap_inuse_bytes")
			more := blockRecords(owner, 4, side, scoped)[map[bool]int{true: 1, false: blocks}[scoped]:]
			for i := 0; i < len(more); i += 1000 {
				send(b, w, more[i:min(len(more), i+1000)])
			}
			last4 := map[bool]string{true: `"grid-3"`, false: `"b-3-31,31,31"`}[scoped]
			deadline = time.Now().Add(time.Minute)
			for !takes.has(last4) || !legacy.has(last4) {
				if time.Now().After(deadline) {
					b.Fatal("the watchers did not get the grids")
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(8 * time.Second)
			_, rss2 := procUsage(b, node.pid)
			heap2 := nodeMetric(b, node, "go_memstats_heap_inuse_bytes")
			// They go again: what follows measures one grid.
			var gone []string
			for _, r := range more {
				id := r[strings.Index(r, `"id":`)+5:]
				gone = append(gone, fmt.Sprintf(`{"type":"remove","id":%s,"owner":%q}`, id[:strings.Index(id, `",`)+1], owner))
			}
			for i := 0; i < len(gone); i += 1000 {
				send(b, w, gone[i:min(len(gone), i+1000)])
			}
			for !takes.has(last4, `"remove"`) || !legacy.has(last4, `"remove"`) {
				if time.Now().After(deadline) {
					b.Fatal("the watchers did not see the grids go")
				}
				time.Sleep(50 * time.Millisecond)
			}
			// A snapshot client too, once it holds the world (a grid
			// fills over many ticks), first idle for as long as the
			// changes take, then during them.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			sc, err := snapshot.Dial(ctx, udp, snapshot.ClientOptions{})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			deadline = time.Now().Add(3 * time.Minute)
			for !holds(sc, scoped, 1, blocks) {
				if time.Now().After(deadline) {
					b.Fatal("the snapshot client did not get the world")
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(time.Second)
			const window = changes * 50 * time.Millisecond
			idlePk0, idle0 := sc.Received()
			time.Sleep(window)
			idlePk1, idle1 := sc.Received()
			// The peer without scopes (a 2016 one) costs the node the
			// grid's encoding at every change: it leaves for the measure
			// of the others, and is measured alone after.
			legacyConn.CloseNow()
			time.Sleep(500 * time.Millisecond)
			takes.reset()
			snapPk0, snap0 := sc.Received()
			for k := range changes {
				send(b, w, []string{blockChange(owner, 0, side, (k*7919)%blocks, 16+k, scoped)})
				time.Sleep(50 * time.Millisecond)
			}
			snapPk1, snap1 := sc.Received()
			sc.Close()
			time.Sleep(time.Second)
			wsBytes, wsMsgs := takes.bytes.Load(), takes.msgs.Load()
			rawClient(b, node.url(), "watch-00000000-00000003", legacy.count)
			deadline = time.Now().Add(time.Minute)
			for legacy.reset(); !legacy.has(last); {
				if time.Now().After(deadline) {
					b.Fatal("the second watcher without scopes did not get the world")
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(time.Second)
			legacy.reset()
			const legacyChanges = 20
			for k := range legacyChanges {
				send(b, w, []string{blockChange(owner, 0, side, (k*7919+13)%blocks, 200+k, scoped)})
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(time.Second)
			// Above the idle packets the window would have had: the idle
			// packet's size times the window's packets (ticks drift).
			idlePacket := float64(idle1-idle0) / float64(max(1, idlePk1-idlePk0))
			b.ReportMetric((float64(snap1-snap0)-idlePacket*float64(snapPk1-snapPk0))/changes, name+"-snapshot-bytes/change")
			b.ReportMetric(float64(rss2-rss1)/(3*blocks), name+"-node-rss-bytes/block")
			b.ReportMetric((heap2-heap1)/(3*blocks), name+"-node-heap-bytes/block")
			b.ReportMetric(float64(rss1-rss0)/blocks, name+"-node-rss-bytes/block-first-grid")
			b.ReportMetric(float64(wsBytes)/changes, name+"-ws-bytes/change")
			b.ReportMetric(float64(wsBytes)/float64(wsMsgs), name+"-ws-bytes/message")
			b.ReportMetric(float64(legacy.bytes.Load())/legacyChanges, name+"-ws-bytes/change-without-scopes")
			b.Logf("%s: node RSS %d → %d → %d MiB (empty, one grid, four); a client that takes scopes got %d messages, %d bytes; one that does not, %d messages, %d bytes",
				name, rss0>>20, rss1>>20, rss2>>20, wsMsgs, wsBytes, legacy.msgs.Load(), legacy.bytes.Load())
			node.node.Stop(b)
		}
	}
}

// holds reports whether a snapshot client holds a world of blockRecords.
func holds(sc *snapshot.Client, scoped bool, grids, blocks int) bool {
	if !scoped {
		return len(sc.Objects()) >= grids*blocks
	}
	for g := range grids {
		if len(sc.Elements(fmt.Sprintf("grid-%d", g), "blocks")) < blocks {
			return false
		}
	}
	return true
}

// BenchmarkScopesFanout: 100 grids of 8×8×8 blocks, 100 blocks of each
// changed per second (5 per grid per 50 ms tick, 10,000 a second in
// all), watched by 100 clients that take scopes, on a node of its own
// process pinned to a core: the node's CPU and each client's bytes per
// second; beside the same world as one object per block (51,200 objects,
// 10,000 updates a second), taking turns.
//
//	go test ./test -run '^$' -bench ScopesFanout -benchtime 1x
func BenchmarkScopesFanout(b *testing.B) {
	const grids, side, clients, perTick = 100, 8, 100, 5
	const window = 8 * time.Second
	for range b.N {
		m := map[string][]float64{}
		for round := range benchRounds() {
			for _, scoped := range []bool{true, false} {
				name := map[bool]string{true: "scope", false: "objects"}[scoped]
				node := startNodeProc(b, strings.Fields(blockNodeArgs)...)
				counters := make([]wireCounter, clients)
				for i := range clients {
					rawClientWith(b, node.url(), fmt.Sprintf("watch-00000000-%08d", i), `,"features":["scopes"]`, counters[i].count)
				}
				const owner = "fill-00000000-00000000"
				w := rawClient(b, node.url(), owner, nil)
				recs := blockRecords(owner, grids, side, scoped)
				for i := 0; i < len(recs); i += 1000 {
					send(b, w, recs[i:min(len(recs), i+1000)])
				}
				last := map[bool]string{true: `"grid-99"`, false: `"b-99-7,7,7"`}[scoped]
				deadline := time.Now().Add(2 * time.Minute)
				for i := range counters {
					for !counters[i].has(last) {
						if time.Now().After(deadline) {
							b.Fatalf("client %d did not get the world", i)
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				time.Sleep(2 * time.Second)
				for i := range counters {
					counters[i].reset()
				}
				cpu0, _ := procUsage(b, node.pid)
				start := time.Now()
				for k := 0; time.Since(start) < window; k++ {
					batch := make([]string, 0, grids*perTick)
					for g := range grids {
						if scoped {
							// A grid's blocks of one tick in one record, as a
							// client sends them (it coalesces per tick).
							var sb strings.Builder
							fmt.Fprintf(&sb, `{"type":"update","id":"grid-%d","scopes":{"blocks":{"ver":0,"modified":{`, g)
							for j := range perTick {
								i := (k*perTick + j) * 37 % (side * side * side)
								if j > 0 {
									sb.WriteByte(',')
								}
								fmt.Fprintf(&sb, `"%d,%d,%d":{"c":%d}`, i%side, i/side%side, i/side/side, k%1000)
							}
							sb.WriteString(`}}}}`)
							batch = append(batch, sb.String())
							continue
						}
						for j := range perTick {
							batch = append(batch, blockChange(owner, g, side, (k*perTick+j)*37%(side*side*side), k%1000, scoped))
						}
					}
					send(b, w, batch)
					time.Sleep(time.Until(start.Add(time.Duration(k+1) * 50 * time.Millisecond)))
				}
				secs := time.Since(start).Seconds()
				cpu1, _ := procUsage(b, node.pid)
				time.Sleep(500 * time.Millisecond)
				var total int64
				for i := range counters {
					total += counters[i].bytes.Load()
				}
				cpuMs := (cpu1 - cpu0).Seconds() * 1000 / secs
				bytes := float64(total) / clients / secs
				b.Logf("round %d, %s: node %.0f CPU-ms/s, %.0f bytes/s per client", round, name, cpuMs, bytes)
				m[name+"-node-cpu-ms/s"] = append(m[name+"-node-cpu-ms/s"], cpuMs)
				m[name+"-bytes/s/client"] = append(m[name+"-bytes/s/client"], bytes)
				node.node.Stop(b)
			}
		}
		for k, v := range m {
			b.ReportMetric(median(v), k)
		}
		b.ReportMetric(median(m["objects-node-cpu-ms/s"])/median(m["scope-node-cpu-ms/s"]), "cpu-objects/scope")
		b.ReportMetric(median(m["objects-bytes/s/client"])/median(m["scope-bytes/s/client"]), "bytes-objects/scope")
	}
}
