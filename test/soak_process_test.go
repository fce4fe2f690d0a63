package test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/bridge/snapshot"
	"github.com/solipsism/mesh/internal/wiretest"
)

var soakFor = flag.Duration("soak", 0, "TestSoak: how long each chaos phase runs, with bursts up to 100,000 records (0: a short run with bursts up to 20,000)")

// soakNode is a node process of the soak and how to start it again on
// the same ports and data directory.
type soakNode struct {
	name string
	args []string
	p    atomic.Pointer[proc]
}

func (n *soakNode) proc() *proc { return n.p.Load() }

// restart kills the process (kill -9) and starts it again.
func (n *soakNode) restart(t *testing.T) {
	n.proc().Kill()
	n.p.Store(startProc(t, n.args...))
}

// soakPeer is a 2016-style peer of the soak: it owns objects, changes
// them, and connects again in its own name when its node dies.
type soakPeer struct {
	mu   sync.Mutex
	id   string
	node *soakNode
	p    *wiretest.Peer
	objs int
	opts wiretest.Options
}

func (sp *soakPeer) peer() *wiretest.Peer { sp.mu.Lock(); defer sp.mu.Unlock(); return sp.p }

// revive connects the peer again in its own name, with its objects, if
// its node closed it (or died); it reports whether it did.
func (sp *soakPeer) revive(t *testing.T) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p.Closed() == nil {
		return false
	}
	opts := sp.opts
	opts.Owned = sp.p.Owned()
	p, err := wiretest.TryDial(t, sp.node.proc().URL(), sp.id, opts)
	if err != nil {
		return false // its node is being restarted: later
	}
	sp.p = p
	return true
}

// TestSoak: chaos on busy cores. A mesh of three members, a proxy chain of
// depth 3 under one of them, 2016-style peers on every node (one of them
// on a slow link, one that stops reading), an Alloverse client and a
// snapshot client. For a while peers change, add and remove their objects,
// come and go, and bursts of up to 20,000 records (100,000 with -soak)
// arrive anywhere, their senders leaving or dropping after. Then: every
// peer's world equals its node's, every node's equals every other's, the
// bridged clients see it too, and no node needed a repair. Then faults:
// a member and a proxy in the middle of the chain are killed (-9) and
// started again during more chaos; their peers connect again; at the end
// everything converges once more.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute or more of chaos")
	}
	chaos, maxBurst := 15*time.Second, 20000
	if *soakFor > 0 {
		chaos, maxBurst = *soakFor, 100000
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	rnd := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }
	t.Logf("seed %d, chaos %s per phase, bursts up to %d", seed, chaos, maxBurst)
	// A failure is told again after the nodes' logs, which follow it in
	// the output and would hide it from a reader of the output's tail.
	var failures []string
	phase := "setting up"
	fail := func(format string, args ...any) {
		t.Helper()
		failures = append(failures, fmt.Sprintf(format, args...))
		t.Errorf(format, args...)
	}
	t.Cleanup(func() { // registered first: runs after every log is printed
		if t.Failed() {
			t.Logf("TestSoak (seed %d) failed in phase %q: %s", seed, phase, strings.Join(failures, "; "))
		}
	})
	stopBusy := wiretest.BusyCores()
	defer stopBusy()

	secret := strings.Repeat("ef", 32)
	// Peers that cannot keep up are closed after 5 s, and connect again
	// (this process decodes every peer's copy of every burst, on the one
	// core the busy loop leaves it).
	common := []string{"--digest-interval", "300ms", "--stall-timeout", "5s", "--ping-interval", "2s", "--max-conns-per-ip", "-1"}
	newNode := func(name string, args ...string) *soakNode {
		n := &soakNode{name: name, args: append(append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", localPort(t)), "--data-dir", t.TempDir()}, common...), args...)}
		n.p.Store(startProc(t, n.args...))
		return n
	}
	meshArgs := func() []string {
		return []string{"--mesh-bind", fmt.Sprintf("127.0.0.1:%d", localPort(t)), "--mesh-secret", secret, "--mesh-label", "soak", "--mesh-profile", "local"}
	}
	a := newNode("a", append(meshArgs(), "--snapshot-listen", "127.0.0.1:0")...)
	b := newNode("b", append(meshArgs(), "--join", meshAddr(t, a.proc()))...)
	c := newNode("c", append(meshArgs(), "--join", meshAddr(t, a.proc()))...)
	waitMesh(t, []*proc{a.proc(), b.proc(), c.proc()})
	p1 := newNode("p1", "--role", "proxy", "--upstream", b.proc().URL())
	p2 := newNode("p2", "--role", "proxy", "--upstream", p1.proc().URL())
	p3 := newNode("p3", "--role", "proxy", "--upstream", p2.proc().URL())
	nodes := []*soakNode{a, b, c, p1, p2, p3}
	ready := func() {
		waitUntil(t, "every node ready", 60*time.Second, func() bool {
			for _, n := range nodes {
				// (A node busy with a burst on busy cores may take longer
				// than a request's 5 s to answer: ask again.)
				if code, _, _ := tryGet("http://" + n.proc().Addr + "/readyz"); code != 200 {
					return false
				}
			}
			return true
		})
	}
	ready()

	// The peers: two on every node, one on a slow link at the end of the
	// chain.
	var peersMu sync.Mutex
	var peers []*soakPeer
	serial := atomic.Int64{}
	join := func(n *soakNode, opts wiretest.Options) *soakPeer {
		id := fmt.Sprintf("client-%08d-soakpeer", serial.Add(1))
		opts.Forget = true
		sp := &soakPeer{id: id, node: n, opts: opts}
		var err error
		if sp.p, err = wiretest.TryDial(t, n.proc().URL(), id, opts); err != nil {
			return nil // the node is being restarted
		}
		waitAsked(t, sp.p)
		sp.p.TryChange(wiretest.Add("obj-"+id+"-0", id, map[string]any{"n": 0}))
		sp.objs = 1
		peersMu.Lock()
		peers = append(peers, sp)
		peersMu.Unlock()
		return sp
	}
	for _, n := range nodes {
		join(n, wiretest.Options{})
		join(n, wiretest.Options{})
	}
	join(p3, wiretest.Options{ReadDelay: 5 * time.Millisecond})
	// A reader that stops reading after its handshake: the node must
	// close it without anyone else noticing.
	stalled, _, err := websocket.Dial(context.Background(), a.proc().URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.CloseNow()
	stalled.Write(context.Background(), websocket.MessageText, []byte(`["metadataChange",{"identifier":"client-STALLED0-soakpeer"}]`))
	stalled.Write(context.Background(), websocket.MessageText, []byte(fmt.Sprintf(`["worldChange",{"timestamp":%d,"changes":[]}]`, time.Now().UnixMilli())))

	// The bridged clients: Alloverse on a, snapshots on a's UDP port.
	// Like the peers, they connect again when the node closes them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	br := &soakBridged{alloURL: "ws://" + a.proc().Addr + "/alloverse", snapAddr: snapshotAddr(t, a.proc())}
	defer br.close()
	if err := br.revive(ctx); err != nil {
		t.Fatal(err)
	}

	// The chaos: actions at random every few tens of milliseconds.
	var bursts sync.WaitGroup
	var burstsNow atomic.Int32
	var stats struct{ changes, bursts, burstRecords, joins, bridged, revived atomic.Int64 }
	var alloBusy atomic.Bool
	// faults run at their times (fractions of the phase) in the loop.
	type fault struct {
		at float64
		do func()
	}
	runChaos := func(d time.Duration, faults ...fault) {
		start := time.Now()
		deadline := start.Add(d)
		step := 0
		for time.Now().Before(deadline) {
			step++
			if len(faults) > 0 && time.Since(start) > time.Duration(faults[0].at*float64(d)) {
				faults[0].do()
				faults = faults[1:]
			}
			peersMu.Lock()
			sp := peers[rnd(len(peers))]
			peersMu.Unlock()
			if sp.revive(t) {
				stats.revived.Add(1)
				continue
			}
			p := sp.peer()
			switch k := rnd(100); {
			case k < 45 && p.Closed() == nil:
				stats.changes.Add(1)
				o := rnd(sp.objs)
				p.TryChange(wiretest.Update(fmt.Sprintf("obj-%s-%d", sp.id, o), sp.id, map[string]any{"n": step}))
			case k < 55 && p.Closed() == nil && sp.objs < 6:
				p.TryChange(wiretest.Add(fmt.Sprintf("obj-%s-%d", sp.id, sp.objs), sp.id, map[string]any{"n": step}))
				sp.objs++
			case k < 62 && p.Closed() == nil && sp.objs > 1:
				sp.objs--
				p.TryChange(wiretest.Remove(fmt.Sprintf("obj-%s-%d", sp.id, sp.objs), sp.id))
			case k < 66 && burstsNow.Load() < 2:
				n := nodes[rnd(len(nodes))]
				size, stay, drop := 1+rnd(maxBurst), time.Duration(rnd(1000))*time.Millisecond, rnd(2) == 0
				burstsNow.Add(1)
				bursts.Add(1)
				stats.bursts.Add(1)
				stats.burstRecords.Add(int64(size))
				go func() {
					defer bursts.Done()
					defer burstsNow.Add(-1)
					soakBurst(t, n.proc(), fmt.Sprintf("burst-%08d-soakpeer", serial.Add(1)), size, stay, drop)
				}()
			case k < 68:
				// A peer leaves for good and another joins somewhere.
				peersMu.Lock()
				if len(peers) > 8 && sp.opts.ReadDelay == 0 {
					for i := range peers {
						if peers[i] == sp {
							peers = append(peers[:i], peers[i+1:]...)
							break
						}
					}
					p.Close()
				}
				peersMu.Unlock()
				join(nodes[rnd(len(nodes))], wiretest.Options{})
				stats.joins.Add(1)
			case k < 90 && alloBusy.CompareAndSwap(false, true):
				stats.bridged.Add(1)
				go func(n int) {
					defer alloBusy.Store(false)
					if br.revive(ctx) == nil {
						br.write(ctx, n)
					}
				}(step)
			}
			time.Sleep(time.Duration(10+rnd(40)) * time.Millisecond)
		}
		for _, f := range faults {
			f.do()
		}
		bursts.Wait()
		for alloBusy.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("chaos: %d steps, %d changes, %d bursts of %d records in all, %d peers joined, %d bridged writes, %d peers connected again after their node closed them",
			step, stats.changes.Load(), stats.bursts.Load(), stats.burstRecords.Load(), stats.joins.Load(), stats.bridged.Load(), stats.revived.Load())
	}

	// check waits until every peer, node and bridged client holds the
	// same world.
	check := func(phase string) {
		t.Helper()
		peersMu.Lock()
		defer peersMu.Unlock()
		// Peers the nodes closed (they could not keep up) connect again,
		// as long as it takes; a 2016 peer takes its identifier back only
		// once its node has seen the old connection go, after the
		// reclaim grace: before that it is closed with 4004.
		at := func() []peerAt {
			var out []peerAt
			for _, sp := range peers {
				if sp.revive(t) {
					t.Logf("%s: %s connects again", phase, sp.id)
				}
				out = append(out, peerAt{sp.peer(), sp.node.proc()})
			}
			return out
		}
		waitUntil(t, phase+": every peer connected", 60*time.Second, func() bool {
			for _, pa := range at() {
				if pa.peer.Closed() != nil {
					time.Sleep(time.Second)
					return false
				}
			}
			return true
		})
		t0 := time.Now()
		waitConvergedEach(t, func() []peerAt {
			out := at()
			for _, pa := range out {
				if pa.peer.Closed() != nil {
					return nil // not yet connected again: not settled
				}
			}
			return out
		}, 120*time.Second)
		ref := worldOf(t, a.proc())
		waitUntil(t, phase+": every node holds a's world", 60*time.Second, func() bool {
			ref = worldOf(t, a.proc())
			for _, n := range nodes[1:] {
				if d := differs(worldOf(t, n.proc()), ref, ""); d != "" {
					return false
				}
			}
			return true
		})
		var last string
		held := false
		defer func() {
			// Only when this check failed (waitUntil ends the test): an
			// earlier failure, a repair say, must not stop node a for the
			// checks that follow.
			if !held {
				t.Logf("%s: the bridged clients' last difference: %s", phase, last)
				t.Logf("the Alloverse client's goroutines:\n%s", clientStacks())
				t.Logf("node a's Alloverse goroutines:\n%s", bridgeStacks(a.proc()))
			}
		}()
		waitUntil(t, phase+": the bridged clients hold the world", 60*time.Second, func() bool {
			if err := br.revive(ctx); err != nil {
				last = err.Error()
				return false
			}
			allo, snap := br.clients()
			node := worldOf(t, a.proc())
			// Both clients' differences: one bridge missing what the
			// other has points at that bridge, both at the node.
			var diffs []string
			if d := bridgedDiff(alloView(allo), node); d != "" {
				_, rev, _ := allo.Document()
				// The place's own document tells whether the bridge or
				// its client lacks it.
				place := "place's document unavailable"
				if _, doc, err := tryGetWithin("http://"+a.proc().Addr+"/api/alloverse", 30*time.Second); err == nil {
					var head struct {
						Revision uint64
						Sessions []struct{ Ack, Sent uint64 }
					}
					json.Unmarshal([]byte(doc), &head) //nolint:errcheck // judged below
					pd := bridgedDiff(alloEntities([]byte(doc)), node)
					if pd == "" {
						pd = "matches the node"
					}
					place = fmt.Sprintf("place at revision %d, its clients' acknowledged and last sent revisions %v: %s", head.Revision, head.Sessions, pd)
				}
				diffs = append(diffs, fmt.Sprintf("Alloverse: %s (client at revision %d, %+v; %s)", d, rev, allo.Stats(), place))
			}
			if d := bridgedDiff(snapView(snap), node); d != "" {
				diffs = append(diffs, "snapshot: "+d)
			}
			last = strings.Join(diffs, "; ")
			return len(diffs) == 0
		})
		held = true
		t.Logf("bridged clients connected again %d times", br.revived.Load())
		t.Logf("%s: %d peers, 6 nodes and 2 bridged clients hold the same %d objects (%s after the chaos)",
			phase, len(peers), len(ref), time.Since(t0).Round(time.Millisecond))
	}
	repairs := func() map[string]float64 {
		out := map[string]float64{}
		for _, n := range nodes {
			_, m := httpGet(t, "http://"+n.proc().Addr+"/metrics")
			out[n.name] = repairsOf(m)
		}
		return out
	}

	phase = "chaos without faults"
	runChaos(chaos)
	phase = "checks without faults"
	check("without faults")
	time.Sleep(time.Second) // a few more digests
	for name, r := range repairs() {
		if r != 0 {
			fail("node %s repaired %v objects in a run without faults: a divergence", name, r)
		}
	}
	if log := a.proc().Log(); !strings.Contains(log, "peer stalled; closing link") && !strings.Contains(log, "did not answer a keepalive ping") {
		fail("the reader that stopped reading was not closed")
	}

	// Faults: kill -9 a member and the middle of the chain, start them
	// again, while the chaos goes on; their peers connect again.
	phase = "chaos with faults"
	runChaos(chaos, fault{0.25, func() { c.restart(t) }}, fault{0.5, func() { p2.restart(t) }})
	ready()
	phase = "checks after the faults"
	check("after kill -9 of a member and a proxy")
	t.Logf("repairs after the faults (allowed): %v", repairs())
}

// bridgeStacks makes the node dump its goroutines (SIGQUIT; it exits)
// and returns those in the Alloverse bridge.
func bridgeStacks(p *proc) string {
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	var out []string
	for _, block := range strings.Split(p.Log(), "\n\n") {
		if strings.Contains(block, "bridge/alloverse") {
			out = append(out, block)
		}
	}
	return strings.Join(out, "\n\n")
}

// clientStacks returns the stacks of this process's goroutines that run
// the Alloverse client.
func clientStacks() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, block := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(block, "alloverse.(*Client)") {
			out = append(out, block)
		}
	}
	return strings.Join(out, "\n\n")
}

// soakBridged are the soak's Alloverse and snapshot clients.
type soakBridged struct {
	alloURL, snapAddr string
	revived           atomic.Int64

	mu     sync.Mutex
	allo   *alloverse.Client
	avatar string
	snap   *snapshot.Client
}

func (b *soakBridged) clients() (*alloverse.Client, *snapshot.Client) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allo, b.snap
}

// revive connects whichever client is not connected (the node closes one
// that does not take what it is sent in time).
func (b *soakBridged) revive(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if b.allo == nil || isDone(b.allo.Done()) {
		if b.allo != nil {
			b.allo.Close()
			b.revived.Add(1)
		}
		c, err := alloverse.DialClient(dctx, b.alloURL, alloverse.ClientOptions{})
		if err != nil {
			b.allo = nil
			return fmt.Errorf("alloverse: %w", err)
		}
		b.allo = c
		if b.avatar, _, err = c.Announce(dctx, map[string]any{"n": 0}); err != nil {
			return fmt.Errorf("alloverse announce: %w", err)
		}
	}
	if b.snap == nil || isDone(b.snap.Done()) {
		if b.snap != nil {
			b.snap.Close()
			b.revived.Add(1)
		}
		c, err := snapshot.Dial(dctx, b.snapAddr, snapshot.ClientOptions{})
		if err != nil {
			b.snap = nil
			return fmt.Errorf("snapshot: %w", err)
		}
		b.snap = c
		if err := c.Set("snap-soak-"+c.Identifier(), map[string]any{"n": 0}); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	return nil
}

// write changes both clients' objects.
func (b *soakBridged) write(ctx context.Context, n int) {
	b.mu.Lock()
	allo, avatar, snap := b.allo, b.avatar, b.snap
	b.mu.Unlock()
	allo.Request(ctx, "change_components", avatar, "add_or_change", map[string]any{"n": n})
	snap.Set("snap-soak-"+snap.Identifier(), map[string]any{"n": n})
}

func (b *soakBridged) close() {
	allo, snap := b.clients()
	if allo != nil {
		allo.Close()
	}
	if snap != nil {
		snap.Close()
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// soakBurst sends n adds from a new peer on node in messages of 5,000,
// waits stay, and closes its connection (or drops it: its objects are
// then kept for the reclaim grace).
func soakBurst(t *testing.T, node *proc, id string, n int, stay time.Duration, drop bool) {
	b, err := wiretest.TryDial(t, node.URL(), id, wiretest.Options{Forget: true})
	if err != nil {
		return // the node is being restarted
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(b.Messages()) == 0 && time.Now().Before(deadline) && b.Closed() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for start := 0; start < n && b.Closed() == nil; start += 5000 {
		recs := make([]map[string]any, 0, 5000)
		for i := start; i < min(n, start+5000); i++ {
			recs = append(recs, wiretest.Add(fmt.Sprintf("%s-%d", id, i), id, map[string]any{"n": i, "position": []int{i % 100, 0, i / 100}}))
		}
		if b.Send("worldChange", map[string]any{"timestamp": time.Now().UnixMilli(), "changes": recs}) != nil {
			break
		}
	}
	time.Sleep(stay)
	if drop {
		b.Drop()
	} else {
		b.Close()
	}
}

// alloView is the Alloverse client's copy of the world: entity id to its
// "n" component.
func alloView(c *alloverse.Client) map[string]string {
	doc, _, ok := c.Document()
	if !ok {
		return nil
	}
	return alloEntities(doc)
}

// alloEntities is an Alloverse document's entities: id to their "n".
func alloEntities(doc []byte) map[string]string {
	var d struct {
		Entities map[string]struct {
			Components map[string]json.RawMessage `json:"components"`
		} `json:"entities"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return nil
	}
	out := make(map[string]string, len(d.Entities))
	for id, e := range d.Entities {
		out[id] = string(e.Components["n"])
	}
	return out
}

// snapView is the snapshot client's copy: object id to its "n".
func snapView(c *snapshot.Client) map[string]string {
	objs := c.Objects()
	out := make(map[string]string, len(objs))
	for id, p := range objs {
		out[id] = string(p.Value("n"))
	}
	return out
}

// bridgedDiff describes how a bridged client's view differs from a node's
// world ("" if it does not).
func bridgedDiff(view map[string]string, node map[string]wiretest.Object) string {
	if view == nil {
		return "no view"
	}
	for id, o := range node {
		if v, ok := view[id]; !ok || v != string(o.Properties["n"]) {
			return fmt.Sprintf("%s: %q, node %s", id, v, o.Properties["n"])
		}
	}
	for id := range view {
		if _, ok := node[id]; !ok {
			return "extra " + id
		}
	}
	return ""
}
