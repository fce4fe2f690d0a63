package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// BenchmarkCores drives one node in-process, its clients on in-memory
// pipes that only count what they are sent, so that nearly all the CPU is
// the node's; every client updates its object at 20 Hz, more than the node
// can deliver, and the metric records/s is how many change records the
// node delivers a second. Run it at several GOMAXPROCS to see
// how the node's throughput grows with cores:
//
//	go test ./relay -run '^$' -bench Cores -benchtime 1x -cpu 1,2
//
// Every client owns objs objects and updates each at 20 Hz (an avatar of
// many parts): all-see-all, 300 clients of 10 objects in one world; rooms,
// 20 rooms of 10 clients of 150 objects (5.4 M records a second to deliver:
// with 50, 1.8 M, the load was below what one core delivers, and no second
// core could show in the figure); interest, 300 clients of 50
// objects on a 20 × 15 grid, 10 apart, each seeing those within 15 (its 8
// neighbours'); priority, the same with priority by distance; crowd, 1,000
// clients of one object 2 apart in one area, each seeing all, updating at
// 5 Hz, with priority (near 5, 5 bands) as solipsism-load's crowd scenario.
func BenchmarkCores(b *testing.B) {
	const window = 3 * time.Second
	for _, tc := range []struct {
		name          string
		clients, objs int
		meta          func(i int) map[string]any // extra metadata of client i
		props         func(i int) map[string]any // its object's properties
		near          float64                    // Options.Priority.Near
		bands         int                        // Options.Priority.Bands
		every         time.Duration              // between updates; 50 ms if zero
	}{
		{"all-see-all", 300, 10, nil, nil, 0, 0, 0},
		{"rooms", 200, 150,
			func(i int) map[string]any { return map[string]any{"rooms": []string{fmt.Sprintf("room-%d", i%20)}} },
			func(i int) map[string]any { return map[string]any{"room": fmt.Sprintf("room-%d", i%20)} }, 0, 0, 0},
		{"interest", 300, 50,
			func(i int) map[string]any {
				x, z := float64(i%20)*10, float64(i/20)*10
				return map[string]any{"interest": map[string]any{"min": []float64{x - 15, -1, z - 15}, "max": []float64{x + 15, 1, z + 15}}}
			},
			func(i int) map[string]any {
				return map[string]any{"position": []float64{float64(i%20) * 10, 0, float64(i/20) * 10}}
			}, 0, 0, 0},
		// interest, with priority by distance (nearer than 5: every tick).
		{"priority", 300, 50,
			func(i int) map[string]any {
				x, z := float64(i%20)*10, float64(i/20)*10
				return map[string]any{"interest": map[string]any{"min": []float64{x - 15, -1, z - 15}, "max": []float64{x + 15, 1, z + 15}}}
			},
			func(i int) map[string]any {
				return map[string]any{"position": []float64{float64(i%20) * 10, 0, float64(i/20) * 10}}
			}, 5, 0, 0},
		{"crowd", 1000, 1,
			func(i int) map[string]any {
				x, z := float64(i%32)*2, float64(i/32)*2 // (reaching 10,000 away, as the tool's)
				return map[string]any{"interest": map[string]any{"min": []float64{x - 1e4, -1e4, z - 1e4}, "max": []float64{x + 1e4, 1e4, z + 1e4}}}
			},
			func(i int) map[string]any {
				return map[string]any{"position": []float64{float64(i%32) * 2, 0, float64(i/32) * 2}}
			}, 5, 5, 200 * time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n, err := relay.New(relay.Options{Tick: 50 * time.Millisecond, Quotas: relay.Quotas{MessagesPerSecond: -1, RecordsPerSecond: -1}, DigestInterval: -1,
				Priority: relay.PriorityOptions{Near: tc.near, Bands: tc.bands}})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close(context.Background())
			var delivered atomic.Int64
			clients := make([]*pipeClient, tc.clients)
			for i := range clients {
				md := map[string]any{}
				if tc.meta != nil {
					md = tc.meta(i)
				}
				props := map[string]any{"n": 0}
				if tc.props != nil {
					for k, v := range tc.props(i) {
						props[k] = v
					}
				}
				clients[i] = dialPipe(n, fmt.Sprintf("client-%08d-cores000", i), tc.objs, md, props, &delivered)
			}
			for _, c := range clients {
				<-c.ready
			}
			// Everyone's first objects delivered before the count starts.
			time.Sleep(time.Second)
			every := tc.every
			if every == 0 {
				every = 50 * time.Millisecond
			}
			stop := updateAll(clients, every)
			perSecond := measureDelivered(b, &delivered, window)
			stop()
			b.ReportMetric(perSecond, "records/s")
		})
	}
}

// measureDelivered counts what delivered grows by over b.N windows, the
// benchmark's timer running, and returns it per second. It also reports
// the process's CPU time per record delivered (cpu-ns/record: the node's
// and its in-process clients', which only count what they are sent), the
// cost of a record whatever the rate.
func measureDelivered(b *testing.B, delivered *atomic.Int64, window time.Duration) float64 {
	b.ResetTimer()
	var total int64
	var took, cpu time.Duration
	for range b.N {
		start, before, cpu0 := time.Now(), delivered.Load(), processCPU()
		time.Sleep(window)
		total += delivered.Load() - before
		took += time.Since(start)
		cpu += processCPU() - cpu0
	}
	b.StopTimer()
	if total > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(total), "cpu-ns/record")
	}
	return float64(total) / took.Seconds()
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // (RUSAGE_SELF cannot fail)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pipeClient is a 2016-style client on an in-memory pipe that counts the
// records it is sent without decoding them.
type pipeClient struct {
	conn  peer.Conn
	id    string
	objs  int
	props map[string]any
	ready chan struct{}
	wmu   sync.Mutex
	buf   []byte
}

func startPipeClient(c peer.Conn, id string, objs int, md, props map[string]any, delivered *atomic.Int64) *pipeClient {
	pc := &pipeClient{conn: c, id: id, objs: objs, props: props, ready: make(chan struct{})}
	md["identifier"], md["identifierChain"] = id, []string{id}
	mdMsg, _ := json.Marshal([]any{"metadataChange", md})
	idKey := []byte(`"id":`)
	go func() {
		ctx := context.Background()
		once := sync.OnceFunc(func() { close(pc.ready) })
		var buf bytes.Buffer // (reused: the clients must cost little beside the node)
		for {
			r, err := c.Reader(ctx)
			if err == nil {
				buf.Reset()
				_, err = buf.ReadFrom(r)
			}
			if err != nil {
				once()
				return
			}
			msg := buf.Bytes()
			switch {
			case bytes.HasPrefix(msg, []byte(`["requestMetadata"`)):
				pc.write(mdMsg)
			case bytes.HasPrefix(msg, []byte(`["requestRefresh"`)):
				pc.add()
				once()
			default:
				delivered.Add(int64(bytes.Count(msg, idKey)))
			}
		}
	}()
	return pc
}

// dialPipe serves a pipeClient on an in-memory pipe to n.
func dialPipe(n *relay.Node, id string, objs int, md, props map[string]any, delivered *atomic.Int64) *pipeClient {
	a, c := peer.Pipe()
	go n.ServeConn(a, ownership.Downstream)
	return startPipeClient(c, id, objs, md, props, delivered)
}

// updateAll has every client update its objects every d until the
// returned stop is called, which waits for them to stop.
func updateAll(clients []*pipeClient, d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.updateEvery(d, done) })
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// add sends the client's objects whole: its refresh answer.
func (pc *pipeClient) add() {
	var changes []any
	for k := range pc.objs {
		changes = append(changes, map[string]any{"type": "add", "id": fmt.Sprintf("o%d-%s", k, pc.id), "owner": pc.id, "properties": pc.props})
	}
	b, _ := json.Marshal([]any{"worldChange", map[string]any{"timestamp": time.Now().UnixMilli(), "changes": changes}})
	pc.write(b)
}

// update sends an update of every object of the client's, n set to v,
// written by hand: the clients must cost little beside the node.
func (pc *pipeClient) update(v int) {
	b := append(pc.buf[:0], `["worldChange",{"timestamp":`...)
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	b = append(b, `,"changes":[`...)
	for k := range pc.objs {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"update","id":"o`...)
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, '-')
		b = append(b, pc.id...)
		b = append(b, `","properties":{"n":`...)
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, `}}`...)
	}
	b = append(b, `]}]`...)
	pc.buf = b
	pc.write(b)
}

func (pc *pipeClient) write(b []byte) {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	pc.conn.Write(context.Background(), b)
}

// updateEvery sends updates every d until stop is closed.
func (pc *pipeClient) updateEvery(d time.Duration, stop chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for v := 1; ; v++ {
		select {
		case <-stop:
			return
		case <-t.C:
			pc.update(v)
		}
	}
}
