package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/bridge/snapshot"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// bridged are the Alloverse and snapshot clients of a run (--allo,
// --snapshot). Each follows the whole world, measures how long the load
// clients' changes take to reach it, and writes an object of its own at
// the load rate, which the WebSocket clients see like any other.
type bridged struct {
	allo  []*bridgedClient
	snaps []*bridgedClient
	// lastDiff describes the last difference check found, for the log.
	lastDiff string
}

// bridgedClient is one Alloverse or snapshot client. A connection the node
// closes (a client starved of CPU misses its deadlines and is rightly
// dropped) is replaced, as a real client would: its view starts over.
type bridgedClient struct {
	dial func(ctx context.Context) (*bridgedConn, error)
	cur  atomic.Pointer[bridgedConn]
}

// bridgedConn is one connection of a bridged client.
type bridgedConn struct {
	own string // the object it writes
	// box is its region (--snapshot-interest, --allo-view), or nil: it
	// is sent the whole world.
	box *peer.Box
	// view returns its current copy of the world: object id to its "t"
	// value; ok is false while it has none.
	view    func() (map[string]string, bool)
	write   func(t int64) error
	changed func() <-chan struct{}
	close   func()
	done    <-chan struct{}
	// gone reports why the connection ended, or nil while up.
	gone func() error
}

func (bc *bridgedClient) view() (map[string]string, bool) { return bc.cur.Load().view() }
func (bc *bridgedClient) gone() error                     { return bc.cur.Load().gone() }

// bridgedCheck counts the bridged clients whose view differs from the
// node's world.
type bridgedCheck struct {
	allo, snaps int
	// alloHeld and snapsHeld are the objects their views held, in all.
	alloHeld, snapsHeld int
}

// startBridged connects the bridged clients and starts them.
func startBridged(ctx context.Context, cfg *config, rate float64, st *stats, wg *sync.WaitGroup) (*bridged, error) {
	b := &bridged{}
	for k := range cfg.allo {
		bc := &bridgedClient{dial: func(ctx context.Context) (*bridgedConn, error) { return dialAllo(ctx, cfg, k) }}
		if err := bc.start(ctx, rate, st, &st.alloLat, wg); err != nil {
			return nil, fmt.Errorf("alloverse client %d: %w", k, err)
		}
		b.allo = append(b.allo, bc)
	}
	for k := range cfg.snapshots {
		bc := &bridgedClient{dial: func(ctx context.Context) (*bridgedConn, error) { return dialSnapshot(ctx, cfg, k) }}
		if err := bc.start(ctx, rate, st, &st.snapLat, wg); err != nil {
			return nil, fmt.Errorf("snapshot client %d: %w", k, err)
		}
		b.snaps = append(b.snaps, bc)
	}
	return b, nil
}

// bridgedPlace is where bridged client k stands on the grid, and its
// region of half-size r around it.
func bridgedPlace(cfg *config, k int, r float64) ([3]float64, *peer.Box) {
	side := max(1, cfg.side)
	at := [3]float64{float64((k*7+3)%side) * cfg.spacing, 0, float64((k*5+1)%side) * cfg.spacing}
	return at, &peer.Box{Min: [3]float64{at[0] - r, at[1] - r, at[2] - r}, Max: [3]float64{at[0] + r, at[1] + r, at[2] + r}}
}

// dialAllo connects an Alloverse client and announces it (its avatar is
// the entity it writes; with --allo-view it stands on the grid).
func dialAllo(ctx context.Context, cfg *config, k int) (*bridgedConn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := alloverse.DialClient(dctx, cfg.alloURL, alloverse.ClientOptions{Token: cfg.token})
	if err != nil {
		return nil, err
	}
	avatarProps := map[string]any{"t": 0}
	var box *peer.Box
	if cfg.alloView > 0 {
		var at [3]float64
		at, box = bridgedPlace(cfg, k, cfg.alloView)
		avatarProps["position"] = at[:]
	}
	avatar, _, err := c.Announce(dctx, avatarProps)
	if err != nil {
		c.Close()
		return nil, err
	}
	view := func() (map[string]string, bool) {
		doc, _, ok := c.Document()
		if !ok {
			return nil, false
		}
		var d struct {
			Entities map[string]struct {
				Components map[string]json.RawMessage `json:"components"`
			} `json:"entities"`
		}
		if json.Unmarshal(doc, &d) != nil {
			return nil, false
		}
		out := make(map[string]string, len(d.Entities))
		for id, e := range d.Entities {
			out[id] = string(e.Components["t"])
		}
		return out, true
	}
	write := func(t int64) error {
		_, err := c.Request(ctx, "change_components", avatar, "add_or_change", map[string]any{"t": t})
		return err
	}
	return &bridgedConn{own: avatar, box: box, view: view, write: write, changed: c.Changed, close: func() { c.Close() }, done: c.Done(), gone: doneErr(c.Done(), c.Err)}, nil
}

// dialSnapshot connects a snapshot client and writes its object.
func dialSnapshot(ctx context.Context, cfg *config, k int) (*bridgedConn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := snapshot.ClientOptions{Token: cfg.token}
	var at [3]float64
	var box *peer.Box
	if cfg.snapInterest > 0 {
		at, box = bridgedPlace(cfg, cfg.allo+k, cfg.snapInterest)
		opts.Interest = snapshot.Interest{Boxes: []peer.Box{*box}}
	}
	c, err := snapshot.Dial(dctx, cfg.snapshotAddr, opts)
	if err != nil {
		return nil, err
	}
	own := fmt.Sprintf("snap-%08d-%08d", os.Getpid()%100000000, k)
	view := func() (map[string]string, bool) {
		objs := c.Objects()
		out := make(map[string]string, len(objs))
		for id, p := range objs {
			out[id] = string(p.Value("t"))
		}
		return out, true
	}
	write := func(t int64) error {
		props := map[string]any{"t": t}
		if box != nil {
			props["position"] = at[:]
		}
		return c.Set(own, props)
	}
	if err := write(0); err != nil {
		c.Close()
		return nil, err
	}
	return &bridgedConn{own: own, box: box, view: view, write: write, changed: c.Changed, close: func() { c.Close() }, done: c.Done(), gone: doneErr(c.Done(), c.Err)}, nil
}

// start connects the client and runs it until ctx ends: it writes its
// object at rate, records on every change of its view how old the load
// clients' newly seen changes are, and connects again when the node drops
// it.
func (bc *bridgedClient) start(ctx context.Context, rate float64, st *stats, lat *[]time.Duration, wg *sync.WaitGroup) error {
	c, err := bc.dial(ctx)
	if err != nil {
		return err
	}
	bc.cur.Store(c)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer func() { bc.cur.Load().close() }()
		seen := map[string]string{}
		backoff := 100 * time.Millisecond
		for {
			c := bc.cur.Load()
			select {
			case <-ctx.Done():
				return
			case <-c.done:
				// Dropped: connect again, with backoff.
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff + rand.N(backoff)):
				}
				if nc, err := bc.dial(ctx); err == nil {
					bc.cur.Store(nc)
					st.reconnects.Add(1)
					backoff = 100 * time.Millisecond
					clear(seen)
				} else {
					backoff = min(2*backoff, 3*time.Second)
				}
				continue
			case <-c.changed():
			}
			now := time.Now().UnixNano()
			view, ok := c.view()
			if !ok || !st.measuring.Load() {
				continue
			}
			var fresh []time.Duration
			for id, t := range view {
				if id == c.own || seen[id] == t {
					continue
				}
				seen[id] = t
				if v, err := strconv.ParseInt(t, 10, 64); err == nil && v > 1e15 {
					fresh = append(fresh, time.Duration(now-v))
				}
			}
			st.record(lat, fresh...)
		}
	}()
	go func() {
		defer wg.Done()
		if rate <= 0 {
			return
		}
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if st.stopSending.Load() {
				continue
			}
			c := bc.cur.Load()
			if err := c.write(time.Now().UnixNano()); err != nil {
				if ctx.Err() == nil && c.gone() == nil && !isClosed(err) {
					st.fail(fmt.Errorf("bridged client write: %w", err))
				}
				continue // a dropped connection is replaced
			}
			if st.measuring.Load() {
				st.sent.Add(1)
			}
		}
	}()
	return nil
}

// check compares every bridged client's view with the node's world.
func (b *bridged) check(node map[string]nodeObject) bridgedCheck {
	differs := func(bc *bridgedClient) bool {
		if err := bc.gone(); err != nil {
			b.lastDiff = "connection lost: " + err.Error()
			return true
		}
		view, ok := bc.view()
		if !ok {
			b.lastDiff = "no view yet"
			return true
		}
		var missing, extra, stale int
		var example string
		box := bc.cur.Load().box
		// (A region's edge: what lies within the bridges' margin of it
		// may be held or not.)
		const margin = relay.DefaultInterestMargin
		for id, o := range node {
			t, ok := view[id]
			if box != nil && o.placed && id != bc.cur.Load().own && !box.Contains(o.at, 0) {
				if ok && !box.Contains(o.at, margin) {
					extra++
					example = "out of its region " + id
				}
				continue
			}
			switch {
			case !ok:
				missing++
				example = "missing " + id
			case !sameNumber(t, o.t):
				stale++
				example = fmt.Sprintf("%s: %s, node %s", id, t, o.t)
			}
		}
		for id := range view {
			if _, ok := node[id]; !ok {
				extra++
				example = "extra " + id
			}
		}
		if missing+extra+stale == 0 {
			return false
		}
		b.lastDiff = fmt.Sprintf("%d missing, %d extra, %d stale (%s)", missing, extra, stale, example)
		return true
	}
	held := func(bc *bridgedClient) int {
		view, _ := bc.view()
		return len(view)
	}
	var c bridgedCheck
	for _, bc := range b.allo {
		if differs(bc) {
			c.allo++
		}
		c.alloHeld += held(bc)
	}
	for _, bc := range b.snaps {
		if differs(bc) {
			c.snaps++
		}
		c.snapsHeld += held(bc)
	}
	return c
}

// doneErr reports err() once done is closed.
func doneErr(done <-chan struct{}, err func() error) func() error {
	return func() error {
		select {
		case <-done:
			if e := err(); e != nil {
				return e
			}
			return fmt.Errorf("closed")
		default:
			return nil
		}
	}
}

// sameNumber compares two JSON values, numbers by value: a bridge may
// spell a number differently from the node.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}

// fill puts the bridged clients' figures in the report.
func (b *bridged) fill(r *report, st *stats, c bridgedCheck) {
	r.AlloClients, r.SnapshotClients = len(b.allo), len(b.snaps)
	r.AlloInconsistent, r.SnapshotInconsistent = c.allo, c.snaps
	if len(b.allo) > 0 {
		r.AlloHeld = float64(c.alloHeld) / float64(len(b.allo))
	}
	if len(b.snaps) > 0 {
		r.SnapshotHeld = float64(c.snapsHeld) / float64(len(b.snaps))
	}
	if len(b.allo) > 0 {
		p := st.percentiles(&st.alloLat)
		r.AlloP50ms, r.AlloP99ms = p.p50, p.p99
	}
	if len(b.snaps) > 0 {
		p := st.percentiles(&st.snapLat)
		r.SnapshotP50ms, r.SnapshotP99ms = p.p50, p.p99
	}
}

// printBridged adds the bridged clients' rows to the summary table.
func printBridged(w io.Writer, r report) {
	row := func(name string, n int, p50, p99 float64, bad int, checked bool) {
		if n == 0 {
			return
		}
		fmt.Fprintf(w, "%s clients\t%d, latency p50 / p99 %.1f / %.1f ms", name, n, p50, p99)
		if checked {
			fmt.Fprintf(w, ", %d of %d hold the node's world", n-bad, n)
		}
		fmt.Fprintln(w)
	}
	row("alloverse", r.AlloClients, r.AlloP50ms, r.AlloP99ms, r.AlloInconsistent, r.Checked > 0)
	row("snapshot", r.SnapshotClients, r.SnapshotP50ms, r.SnapshotP99ms, r.SnapshotInconsistent, r.Checked > 0)
}
