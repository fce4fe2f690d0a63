package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/peer"
)

type report struct {
	Clients        int     `json:"clients"`
	Seconds        float64 `json:"seconds"`
	Sent           int64   `json:"sent"`
	Delivered      int64   `json:"delivered"`
	DeliveredPerS  float64 `json:"delivered_per_second"`
	LatencySamples int     `json:"latency_samples"`
	// Repeats are the records observers got of a value they already had
	// (under priority a near client is sent, now and then, an object's
	// whole pending state again): not changes, so not in the latencies.
	Repeats   int64   `json:"repeats"`
	P50ms     float64 `json:"p50_ms"`
	P95ms     float64 `json:"p95_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	BytesPerS float64 `json:"bytes_per_second"`
	Errors    int64   `json:"errors"`
	// Reconnects counts connections the node closed (a client starved of
	// CPU misses its keepalive) that the client replaced.
	Reconnects int64 `json:"reconnects"`
	// DialRetries counts churn joins whose connection could not be made
	// (a node too busy to answer the handshake in 5 s) and was tried
	// again after a backoff, as a user's client would.
	DialRetries int64 `json:"dial_retries"`
	// FirstDialError says why the first of those failed.
	FirstDialError string `json:"first_dial_error,omitempty"`
	// FirstError says what the first error was.
	FirstError string `json:"first_error,omitempty"`
	// Checked and Inconsistent count the clients whose copy of the world
	// was compared with the node's at the end (--check), and those that
	// differed.
	Checked      int `json:"checked,omitempty"`
	Inconsistent int `json:"inconsistent,omitempty"`
	// The Alloverse (--allo) and snapshot (--snapshot) clients: how many
	// ran, their change-to-view latency, and at the end (--check) how
	// many did not hold the node's world.
	AlloClients          int     `json:"allo_clients,omitempty"`
	AlloP50ms            float64 `json:"allo_p50_ms,omitempty"`
	AlloP99ms            float64 `json:"allo_p99_ms,omitempty"`
	AlloInconsistent     int     `json:"allo_inconsistent,omitempty"`
	SnapshotClients      int     `json:"snapshot_clients,omitempty"`
	SnapshotP50ms        float64 `json:"snapshot_p50_ms,omitempty"`
	SnapshotP99ms        float64 `json:"snapshot_p99_ms,omitempty"`
	SnapshotInconsistent int     `json:"snapshot_inconsistent,omitempty"`
	// AlloHeld and SnapshotHeld are how many objects such a client held at
	// the check, on average (with a region, less than the world).
	AlloHeld     float64 `json:"allo_held,omitempty"`
	SnapshotHeld float64 `json:"snapshot_held,omitempty"`
	// BytesPerClientPerS is what one client was delivered a second.
	BytesPerClientPerS float64 `json:"bytes_per_client_per_second"`
	// NearP99ms is the p99 latency of the objects within --near of an
	// observer's own; FarP99ms and FarMaxMs those beyond 4 × --near: how
	// stale the farthest get.
	NearP99ms float64 `json:"near_p99_ms,omitempty"`
	FarP99ms  float64 `json:"far_p99_ms,omitempty"`
	FarMaxMs  float64 `json:"far_max_ms,omitempty"`
	// FarStaleP99ms and FarStaleMaxMs are how old the value a client
	// showed of a far object had become when the next one arrived (the
	// objects change every 1/--rate s, so never less than that).
	FarStaleP99ms float64 `json:"far_stale_p99_ms,omitempty"`
	FarStaleMaxMs float64 `json:"far_stale_max_ms,omitempty"`
	// FarBehindP99ms and FarBehindMaxMs are how long a client had shown
	// a far object's value after its owner changed it, when the next one
	// arrived: staleness less the time the value was still current
	// (objects of this process only).
	FarBehindP99ms float64 `json:"far_behind_p99_ms,omitempty"`
	FarBehindMaxMs float64 `json:"far_behind_max_ms,omitempty"`
	// NodeCPUCores is the nodes' CPU over the window (summed over the
	// nodes), per client-second and per delivered record; NodeRSSMiB
	// their peak resident memory; Repairs their anti-entropy repairs
	// over the window. Zero when no node answered /metrics.
	NodeCPUCores       float64 `json:"node_cpu_cores,omitempty"`
	NodeCPUPerClientMs float64 `json:"node_cpu_ms_per_client_second,omitempty"`
	NodeCPUPerRecordUs float64 `json:"node_cpu_us_per_record,omitempty"`
	NodeRSSMiB         float64 `json:"node_rss_mib,omitempty"`
	Repairs            float64 `json:"repairs"`
	// Timeline is the run second by second.
	Timeline []sample `json:"timeline,omitempty"`
}

func main() {
	url := flag.String("url", "ws://127.0.0.1:8080/ws", "node WebSocket URL; several, comma-separated (mesh members, proxies), spread the clients over them in blocks of the --interest grid, as near square as their number allows (4 as 2 × 2): each node serves a part of the world")
	clients := flag.Int("clients", 200, "number of clients")
	rate := flag.Float64("rate", 20, "updates per second per client; 0 makes pure observers that own nothing")
	warmup := flag.Duration("warmup", 2*time.Second, "time before measuring")
	duration := flag.Duration("duration", 10*time.Second, "measured window")
	observers := flag.Int("observers", 10, "clients that decode every record to measure latency")
	idle := flag.Bool("idle", false, "connect and stay idle until stdin closes or a signal arrives")
	churn := flag.Int("churn", 0, "extra clients that keep joining (with an object) and leaving while the load runs")
	stall := flag.Int("stalled", 0, "extra clients that answer the handshake and then never read: the node should close them after its stall timeout without others noticing")
	jsonOut := flag.Bool("json", false, "print one JSON report (after a line \"measuring\") instead of a table")
	check := flag.Bool("check", false, "at the end, stop updating, let traffic settle and compare every client's copy of the world with the node's (/api/state)")
	settle := flag.Duration("settle", 15*time.Second, "with --check, how long clients that differ from the node get to catch up before they count as inconsistent")
	progress := flag.Bool("progress", isTerminal(os.Stderr), "print a live progress line on stderr")
	token := flag.String("token", "", "a token presented to a node with authentication on (Authorization: Bearer); it must grant the prefix \"load\"")
	interest := flag.Float64("interest", 0, "if positive, place the clients' objects on a grid 10 apart and give each client an interest box reaching this far around its object, as a big world's users see only their surroundings")
	allo := flag.Int("allo", 0, "Alloverse clients (WebSocket) that also follow the world and update an entity of their own at --rate")
	alloURL := flag.String("allo-url", "", "the node's Alloverse endpoint; empty means --url with /ws replaced by /alloverse")
	snapshots := flag.Int("snapshot", 0, "snapshot clients (UDP) that also follow the world and update an object of their own at --rate")
	snapshotAddr := flag.String("snapshot-addr", "127.0.0.1:7777", "the node's snapshot endpoint (host:port, UDP)")
	snapInterest := flag.Float64("snapshot-interest", 0, "if positive, each snapshot client stands on the grid (as --interest places the clients) and wants only the ghosts within this distance of its place on every axis (the snapshot wire's interest)")
	alloView := flag.Float64("allo-view", 0, "the node's --allo-view-radius, if set: each Alloverse client's avatar stands on the grid, and its view is checked against it")
	rooms := flag.Int("rooms", 0, "if positive, put the clients in this many rooms, round robin (client i in room-<i mod rooms>), each client's object in its room: the node sends each only its room's objects")
	persistent := flag.Bool("persistent", false, "mark the clients' objects \"persistent\": true, so that a node with a store writes every update to disk")
	spacing := flag.Float64("spacing", 10, "with --interest, the distance between neighbouring clients' objects on the grid")
	move := flag.Float64("move", 0, "with --interest, each update moves the client's object on a circle of this radius around its place")
	budget := flag.Int("budget", 0, "bytes per second each client asks the node for at most (metadata \"budget\"; the node sends the nearest objects first); 0: no limit")
	near := flag.Float64("near", 0, "if positive, observers also report the latency of objects within this distance of their own (near) and beyond 4 times it (far: their staleness)")
	scenario := flag.String("scenario", "", "a preset of the flags above, which flags given override:"+scenarioHelp())
	htmlOut := flag.String("html", "", "also write a self-contained HTML report (plots of latency, bytes per client, node CPU and RSS, repairs over time) to this file")
	cpuProfile := flag.String("cpu-profile", "", "write this tool's own CPU profile (go tool pprof) to this file: to tell whether the tool, rather than the node, is what a run is short of")
	flag.Parse()
	stopProfile := func() {}
	if *cpuProfile != "" {
		stop, err := profileCPU(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "solipsism-load:", err)
			os.Exit(2)
		}
		stopProfile = stop
	}
	defer stopProfile()
	if err := applyScenario(flag.CommandLine, *scenario); err != nil {
		fmt.Fprintln(os.Stderr, "solipsism-load:", err)
		os.Exit(2)
	}
	urls := strings.Split(*url, ",")
	if *scenario == "mesh" && len(urls) < 2 {
		fmt.Fprintln(os.Stderr, "solipsism-load: --scenario mesh: give the members' URLs, comma-separated, in --url")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := &config{url: urls[0], urls: urls, spacing: *spacing, move: *move, budget: *budget, near: *near, html: *htmlOut, scenario: *scenario, outJSON: *jsonOut, check: *check, progress: *progress,
		churners: *churn, stalled: *stall, settle: *settle, interest: *interest, token: *token,
		allo: *allo, alloURL: *alloURL, snapshots: *snapshots, snapshotAddr: *snapshotAddr, snapInterest: *snapInterest, alloView: *alloView, persistent: *persistent, rooms: *rooms}
	if *token != "" {
		cfg.dialOpts = &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + *token}}}
	}
	if cfg.alloURL == "" {
		cfg.alloURL = strings.TrimSuffix(cfg.url, "/ws") + "/alloverse"
	}
	if err := run(ctx, cfg, *clients, *rate, *warmup, *duration, *observers, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "solipsism-load:", err)
		stopProfile()
		os.Exit(1)
	}
}

// config is how the tool runs, from its flags.
type config struct {
	url                      string
	urls                     []string
	spacing, move, near      float64
	budget                   int
	html, scenario           string
	dialOpts                 *websocket.DialOptions
	token                    string
	outJSON, check, progress bool
	settle                   time.Duration
	churners, stalled        int
	// interest, when positive, places the clients' objects on a grid 10
	// apart and gives each client an interest box reaching this far.
	interest        float64
	persistent      bool
	rooms           int
	side            int // of the grid, in objects
	allo, snapshots int
	// snapInterest and alloView, when positive, give the bridged clients
	// a place on the grid and a region of that half-size around it.
	snapInterest, alloView float64
	alloURL, snapshotAddr  string
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

type stats struct {
	measuring   atomic.Bool
	stopSending atomic.Bool
	bytes       atomic.Int64
	sent        atomic.Int64
	delivered   atomic.Int64
	errors      atomic.Int64
	firstError  atomic.Value // string
	reconnects  atomic.Int64
	dialRetries atomic.Int64
	repeats     atomic.Int64
	firstDial   atomic.Value // string
	mu          sync.Mutex
	latencies   []time.Duration
	// near and far are the observers' latencies of near and far objects
	// (--near); win* the samples since the timeline last took them.
	near, far, farStale []time.Duration
	farBehind           []time.Duration
	// changes holds the latest changes of the objects the clients write,
	// for farBehind.
	changes                 changeLog
	winAll, winNear, winFar []time.Duration
	// Latencies seen by the Alloverse and snapshot clients.
	alloLat, snapLat []time.Duration
}

// fail counts an error, keeping the first for the report.
func (st *stats) fail(err error) {
	st.errors.Add(1)
	st.firstError.CompareAndSwap(nil, err.Error())
}

// observe adds an observer's latency sample of an object dist away.
// stale, if not negative, is how old the value the client showed until
// then had become; behind, if not negative, how long that value had been
// superseded.
func (st *stats) observe(lat, stale, behind time.Duration, dist, near float64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.latencies = append(st.latencies, lat)
	st.winAll = append(st.winAll, lat)
	switch {
	case near <= 0:
	case dist <= near:
		st.near = append(st.near, lat)
		st.winNear = append(st.winNear, lat)
	case dist > 4*near:
		st.far = append(st.far, lat)
		st.winFar = append(st.winFar, lat)
		if stale >= 0 {
			st.farStale = append(st.farStale, stale)
		}
		if behind >= 0 {
			st.farBehind = append(st.farBehind, behind)
		}
	}
}

// takeWindow returns the samples since it was last called.
func (st *stats) takeWindow() (all, near, far []time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	all, near, far = st.winAll, st.winNear, st.winFar
	st.winAll, st.winNear, st.winFar = nil, nil, nil
	return all, near, far
}

// record adds latency samples to one of st's lists.
func (st *stats) record(list *[]time.Duration, lat ...time.Duration) {
	st.mu.Lock()
	*list = append(*list, lat...)
	st.mu.Unlock()
}

type percentiles struct {
	samples            int
	p50, p95, p99, max float64 // ms
}

// percentiles sorts one of st's lists and reads it.
func (st *stats) percentiles(list *[]time.Duration) percentiles {
	st.mu.Lock()
	lat := *list
	st.mu.Unlock()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))]) / 1e6
	}
	return percentiles{samples: len(lat), p50: pct(0.5), p95: pct(0.95), p99: pct(0.99), max: pct(1)}
}

func run(ctx context.Context, cfg *config, n int, rate float64, warmup, duration time.Duration, observers int, idle bool) error {
	var st stats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Reads outlive the run's context: cancelling a read would cut its
	// connection, and clients leave with a close frame (closeAll), so the
	// node removes their objects at once rather than keep them for a
	// reconnect.
	readCtx, stopReads := context.WithCancel(context.Background())
	defer stopReads()
	var wg sync.WaitGroup
	var clients []*client
	side := max(1, int(math.Ceil(math.Sqrt(float64(n)))))
	cfg.side = side
	for i := 0; i < n; i++ {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		// Contiguous blocks of the grid: each node serves a part of the
		// world, as a deployment sharded by region does.
		curl := cfg.urls[blockOf(i, n, side, len(cfg.urls))]
		c, _, err := websocket.Dial(dctx, curl, cfg.dialOpts)
		dcancel()
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
		c.SetReadLimit(64 << 20)
		// Each client starts at once, as a real one does: it answers the
		// node's handshake while the others are still connecting.
		cl := &client{id: fmt.Sprintf("load-%08d-%08d", os.Getpid()%100000000, i), obj: fmt.Sprintf("obj-%08d-%08d", os.Getpid()%100000000, i),
			world: map[string]string{}, cfg: cfg, url: curl, phase: float64(i) * 2.399,
			c: c, st: &st, observer: i < observers, idle: idle || rate <= 0}
		if cfg.interest > 0 {
			cl.at = [3]float64{float64(i%side) * cfg.spacing, 0, float64(i/side) * cfg.spacing}
			r := cfg.interest
			cl.box = &peer.Box{Min: [3]float64{cl.at[0] - r, -r, cl.at[2] - r}, Max: [3]float64{cl.at[0] + r, r, cl.at[2] + r}}
		}
		if cfg.rooms > 0 {
			cl.room = fmt.Sprintf("room-%d", i%cfg.rooms)
		}
		cl.ownKey = []byte(`"id":"` + cl.obj + `"`)
		clients = append(clients, cl)
		wg.Add(1)
		go func() { defer wg.Done(); cl.run(ctx, readCtx, rate) }()
	}
	closeAll := func() {
		var cw sync.WaitGroup
		for _, cl := range clients {
			cl.leaving.Store(true)
			c := cl.conn()
			cw.Add(1)
			go func() { defer cw.Done(); c.Close(websocket.StatusNormalClosure, "load done") }()
		}
		cw.Wait()
	}
	if idle {
		fmt.Println("connected")
		buf := make([]byte, 1)
		go func() { os.Stdin.Read(buf); cancel() }()
		<-ctx.Done()
	} else {
		select {
		case <-time.After(warmup):
		case <-ctx.Done():
		}
		bridged, err := startBridged(ctx, cfg, rate, &st, &wg)
		if err != nil {
			return err
		}
		start := time.Now()
		st.measuring.Store(true)
		if cfg.outJSON {
			fmt.Println("measuring")
		}
		stopProgress := startProgress(cfg, &st, n)
		tl := startTimeline(&st, cfg.urls, n)
		churnCtx, stopChurn := context.WithCancel(ctx)
		var churnWG sync.WaitGroup
		for i := range cfg.churners {
			churnWG.Add(1)
			go func() { defer churnWG.Done(); churn(churnCtx, cfg, i, &st) }()
		}
		for i := range cfg.stalled {
			go stall(ctx, cfg, i)
		}
		select {
		case <-time.After(duration):
		case <-ctx.Done():
		}
		st.measuring.Store(false)
		samples := tl.end()
		stopProgress()
		stopChurn()
		churnWG.Wait()
		if cfg.outJSON {
			fmt.Println("measured")
		}
		secs := time.Since(start).Seconds()
		var checked, inconsistent int
		var bc bridgedCheck
		if cfg.check {
			st.stopSending.Store(true)
			// Traffic settles: a client that fell behind (a slow bridged
			// client on a busy machine) gets up to --settle to catch up.
			time.Sleep(time.Second)
			for deadline := time.Now().Add(cfg.settle); ; time.Sleep(time.Second) {
				nodes := map[string]map[string]nodeObject{}
				var err error
				for _, u := range cfg.urls {
					if nodes[u], err = nodeWorld(u, cfg.token); err != nil {
						break
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "solipsism-load: check:", err)
					st.fail(err)
					break
				}
				checked, inconsistent = checkMirrors(nodes, clients)
				bc = bridged.check(nodes[cfg.url])
				if inconsistent+bc.allo+bc.snaps == 0 {
					break
				}
				if time.Now().After(deadline) {
					fmt.Fprintf(os.Stderr, "solipsism-load: %d clients, %d Alloverse and %d snapshot clients differ from the node; last difference: %s\n",
						inconsistent, bc.allo, bc.snaps, bridged.lastDiff)
					break
				}
			}
		}
		cancel()
		closeAll()
		p := st.percentiles(&st.latencies)
		r := report{Clients: n, Seconds: secs, Sent: st.sent.Load(), Delivered: st.delivered.Load(),
			DeliveredPerS: float64(st.delivered.Load()) / secs, LatencySamples: p.samples, Repeats: st.repeats.Load(),
			P50ms: p.p50, P95ms: p.p95, P99ms: p.p99, MaxMs: p.max, BytesPerS: float64(st.bytes.Load()) / secs,
			Errors: st.errors.Load(), Reconnects: st.reconnects.Load(), FirstError: firstError(&st),
			DialRetries: st.dialRetries.Load(), FirstDialError: loadString(&st.firstDial), Checked: checked, Inconsistent: inconsistent}
		bridged.fill(&r, &st, bc)
		fillNodes(&r, &st, tl, samples, secs)
		if cfg.html != "" {
			title := cfg.scenario
			if title == "" {
				title = "custom"
			}
			if err := writeHTML(cfg.html, fmt.Sprintf("%s, %d clients on %d node(s)", title, n, len(cfg.urls)), r); err != nil {
				fmt.Fprintln(os.Stderr, "solipsism-load: --html:", err)
			}
		}
		if cfg.outJSON {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		} else {
			printTable(r)
		}
		if r.Inconsistent > 0 || r.AlloInconsistent > 0 || r.SnapshotInconsistent > 0 {
			defer os.Exit(3)
		}
	}
	closeAll()
	stopReads()
	wg.Wait()
	return nil
}

type client struct {
	cfg     *config
	id, obj string
	// url is the node the client connects to; phase its place on the
	// circle it moves along (--move).
	url   string
	phase float64
	// lastT is, for an observer, the "t" of each object's last delivery.
	lastT map[string]int64
	// at is the object's fixed place and box the client's interest, with
	// --interest.
	at  [3]float64
	box *peer.Box
	// room is the client's room and its object's, with --rooms.
	room string
	// world is the client's copy of the world (--check): object id to its
	// "t" property, as received.
	wmuMirror sync.Mutex
	world     map[string]string
	scanned   []scanned // mirror's, kept from message to message
	// c is the client's connection, replaced when the node closes it and
	// the client connects again (guarded by wmu).
	c        *websocket.Conn
	leaving  atomic.Bool  // the run is over: a closed connection stays closed
	resume   atomic.Value // string: the node's resume token for id
	st       *stats
	observer bool
	idle     bool
	ownKey   []byte // `"id":"<obj>"`, to tell the client's own records
	wmu      sync.Mutex
	ready    atomic.Bool
}

// loadString reads a string kept in an atomic.Value ("" if none).
func loadString(v *atomic.Value) string {
	s, _ := v.Load().(string)
	return s
}

func firstError(st *stats) string {
	s, _ := st.firstError.Load().(string)
	return s
}

// conn returns the client's current connection.
func (cl *client) conn() *websocket.Conn {
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	return cl.c
}

// send writes b on the current connection. A write that fails because the
// node closed the connection is not an error: the reader connects again,
// and the client's refresh answer carries its object's latest state.
func (cl *client) send(ctx context.Context, b []byte) {
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	if err := cl.c.Write(ctx, websocket.MessageText, b); err != nil && ctx.Err() == nil && !isClosed(err) {
		cl.st.fail(fmt.Errorf("write: %w", err))
	}
}

// isClosed reports whether err says the connection is closed (by the node,
// or broken), as opposed to a failure of the write itself.
func isClosed(err error) bool {
	return websocket.CloseStatus(err) != -1 || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "closed")
}

// reconnect replaces a connection the node closed (a client starved of CPU
// misses its keepalive pongs and is rightly closed) with a new one, with
// backoff, as a real client does. The copy of the world starts over: the
// node sends everything again once the client has said who it is. It
// returns false if the run ended first.
func (cl *client) reconnect(ctx context.Context) bool {
	cl.ready.Store(false)
	// A first wait too: a node that dropped clients for being slow is busy,
	// and a thousand clients back at once would keep it so.
	backoff := 250 * time.Millisecond
	select {
	case <-ctx.Done():
		return false
	case <-time.After(rand.N(2 * backoff)):
	}
	for {
		if ctx.Err() != nil || cl.leaving.Load() {
			return false
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, _, err := websocket.Dial(dctx, cl.url, cl.cfg.dialOpts)
		cancel()
		if err == nil {
			c.SetReadLimit(64 << 20)
			cl.wmuMirror.Lock()
			clear(cl.world)
			cl.wmuMirror.Unlock()
			cl.wmu.Lock()
			cl.c = c
			cl.wmu.Unlock()
			if cl.leaving.Load() {
				c.Close(websocket.StatusNormalClosure, "load done")
				return false
			}
			cl.st.reconnects.Add(1)
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff + rand.N(backoff)):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

func (cl *client) add(t int64) []byte {
	persistent := ""
	if cl.cfg.persistent {
		persistent = `,"persistent":true`
	}
	if cl.room != "" {
		persistent += `,"room":"` + cl.room + `"`
	}
	return fmt.Appendf(nil, `["worldChange",{"timestamp":%d,"changes":[{"type":"add","id":"%s","owner":"%s","properties":{"position":%s,"t":%d%s}}]}]`,
		time.Now().UnixMilli(), cl.obj, cl.id, cl.position(0), t, persistent)
}

// metadata is the client's answer to requestMetadata: with the resume
// token the node handed it, once it has one, so that after a reconnect it
// takes its identifier (and object) back from the connection the node
// closed.
func (cl *client) metadata() []byte {
	resume := ""
	if tok, _ := cl.resume.Load().(string); tok != "" {
		b, _ := json.Marshal(map[string]string{cl.id: tok})
		resume = `,"resumeTokens":` + string(b)
	}
	if cl.room != "" {
		resume += `,"rooms":["` + cl.room + `"]`
	}
	if cl.cfg.budget > 0 {
		resume += fmt.Sprintf(`,"budget":%d`, cl.cfg.budget)
	}
	if cl.box == nil {
		return fmt.Appendf(nil, `["metadataChange",{"identifier":"%s","identifierChain":["%s"]%s}]`, cl.id, cl.id, resume)
	}
	b := cl.box
	return fmt.Appendf(nil, `["metadataChange",{"identifier":"%s","identifierChain":["%s"],"interest":{"min":[%g,%g,%g],"max":[%g,%g,%g]}%s}]`,
		cl.id, cl.id, b.Min[0], b.Min[1], b.Min[2], b.Max[0], b.Max[1], b.Max[2], resume)
}

// keepResumeToken stores the resume token a node's metadata message hands
// the client.
func (cl *client) keepResumeToken(b []byte) {
	var msg []json.RawMessage
	if json.Unmarshal(b, &msg) != nil || len(msg) != 2 {
		return
	}
	var md struct {
		ResumeTokens map[string]string `json:"resumeTokens"`
	}
	if json.Unmarshal(msg[1], &md) == nil && md.ResumeTokens[cl.id] != "" {
		cl.resume.Store(md.ResumeTokens[cl.id])
	}
}

func (cl *client) run(ctx, readCtx context.Context, rate float64) {
	go cl.read(readCtx, ctx)
	if cl.idle {
		return
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	i := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !cl.ready.Load() || cl.st.stopSending.Load() {
			continue
		}
		i++
		now := time.Now()
		if cl.cfg.near > 0 {
			cl.st.changes.note(cl.obj, now.UnixNano())
		}
		msg := fmt.Appendf(nil, `["worldChange",{"timestamp":%d,"changes":[{"type":"update","id":"%s","owner":"%s","properties":{"position":%s,"t":%d}}]}]`,
			now.UnixMilli(), cl.obj, cl.id, cl.position(i), now.UnixNano())
		cl.send(ctx, msg)
		if cl.st.measuring.Load() {
			cl.st.sent.Add(1)
		}
	}
}

var typeKey = []byte(`{"type":"`)

// read follows the world on ctx until the connection ends; a connection
// the node closed while the run (runCtx) goes on is replaced.
func (cl *client) read(ctx, runCtx context.Context) {
	var buf bytes.Buffer
	for {
		b, err := readInto(ctx, cl.conn(), &buf)
		if err != nil {
			if cl.st.reconnects.Load() < 3 && os.Getenv("SOLIPSISM_LOAD_DEBUG") != "" {
				fmt.Fprintln(os.Stderr, "reconnect after:", err)
			}
			if ctx.Err() != nil || cl.leaving.Load() || !cl.reconnect(runCtx) {
				return
			}
			continue
		}
		switch {
		case bytes.HasPrefix(b, []byte(`["worldChange"`)):
			if cl.cfg.check {
				cl.mirror(b)
			}
			if cl.st.measuring.Load() {
				cl.st.bytes.Add(int64(len(b)))
				// A relay that echoes a client's own record does not
				// deliver it.
				n := bytes.Count(b, typeKey) - bytes.Count(b, cl.ownKey)
				cl.st.delivered.Add(int64(n))
				if cl.observer {
					cl.observe(b)
				}
			}
		case bytes.HasPrefix(b, []byte(`["requestMetadata"`)):
			cl.send(ctx, cl.metadata())
		case bytes.HasPrefix(b, []byte(`["metadata`)):
			cl.keepResumeToken(b)
		case bytes.HasPrefix(b, []byte(`["requestRefresh"`)):
			if !cl.idle {
				t := time.Now().UnixNano()
				if cl.cfg.near > 0 {
					cl.st.changes.note(cl.obj, t)
				}
				cl.send(ctx, cl.add(t))
				cl.ready.Store(true)
			}
		}
	}
}

// readInto reads the next message of c into buf, which it returns the
// bytes of until the next call. One buffer a client, rather than a new
// slice grown for every message (websocket.Conn.Read): a thousand clients
// reading 20 messages a second each otherwise spend the tool's core on
// allocating and collecting them, and the tool, not the node, sets the
// latency a run measures.
func readInto(ctx context.Context, c *websocket.Conn, buf *bytes.Buffer) ([]byte, error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	if buf.Cap() > 1<<20 && buf.Len() < buf.Cap()/8 {
		// After a big message (a refresh answer), let the memory go.
		b := bytes.Clone(buf.Bytes())
		*buf = bytes.Buffer{}
		return b, nil
	}
	return buf.Bytes(), nil
}

func (cl *client) observe(b []byte) {
	now := time.Now().UnixNano()
	var msg []json.RawMessage
	if json.Unmarshal(b, &msg) != nil || len(msg) != 2 {
		cl.st.fail(errors.New("a worldChange the client cannot decode"))
		return
	}
	var wc struct {
		Changes []struct {
			ID         string `json:"id"`
			Properties struct {
				T        int64     `json:"t"`
				Position []float64 `json:"position"`
			} `json:"properties"`
		} `json:"changes"`
	}
	if json.Unmarshal(msg[1], &wc) != nil {
		cl.st.fail(errors.New("a worldChange the client cannot decode"))
		return
	}
	for _, c := range wc.Changes {
		if c.Properties.T > 0 && c.ID != cl.obj {
			dist := -1.0
			if len(c.Properties.Position) == 3 {
				dist = cl.distance([3]float64(c.Properties.Position))
			}
			// Just before this, the client showed the value of the last
			// delivery: as old as that value is now.
			stale, behind := time.Duration(-1), time.Duration(-1)
			if cl.lastT == nil {
				cl.lastT = map[string]int64{}
			}
			prev := cl.lastT[c.ID]
			if c.Properties.T <= prev {
				// A value it had (each object's t grows): not a change.
				cl.st.repeats.Add(1)
				continue
			}
			if prev > 0 {
				stale = time.Duration(now - prev)
				if at, ok := cl.st.changes.supersededAt(c.ID, prev); ok {
					behind = time.Duration(max(0, now-at))
				}
			}
			cl.lastT[c.ID] = c.Properties.T
			cl.st.observe(time.Duration(now-c.Properties.T), stale, behind, dist, cl.cfg.near)
		}
	}
}

// mirror applies a worldChange to the client's copy of the world. It
// scans the node's encoding (peer.AppendChange: each change an object
// starting {"type":"…","id":"…", its "t" a number) rather than decoding
// it, which would cost the tool more than the node spends sending it;
// anything it does not expect goes to mirrorJSON.
func (cl *client) mirror(b []byte) {
	// An escaped string, or an object with a "type" inside properties
	// (every change has an owner right after its id; such an object has
	// none), is decoded.
	if bytes.IndexByte(b, '\\') >= 0 {
		cl.mirrorJSON(b)
		return
	}
	// One pass: each change runs to the next {"type":" (or the end).
	out := cl.scanned[:0]
	i := bytes.Index(b, typeKey)
	for i >= 0 {
		rest := b[i+len(typeKey):]
		typ, after, ok := bytes.Cut(rest, []byte(`"`))
		if !ok || !bytes.HasPrefix(after, []byte(`,"id":"`)) {
			cl.mirrorJSON(b)
			return
		}
		id, after, ok := bytes.Cut(after[len(`,"id":"`):], []byte(`"`))
		if !ok || !bytes.HasPrefix(after, []byte(`,"owner":`)) {
			cl.mirrorJSON(b)
			return
		}
		c := scanned{id: id}
		switch string(typ) {
		case "add", "update", "transfer":
		case "remove":
			c.remove = true
		default:
			cl.mirrorJSON(b)
			return
		}
		end := bytes.Index(after, typeKey)
		seg := after
		if end >= 0 {
			seg = after[:end]
			i = len(b) - len(after) + end
		} else {
			i = -1
		}
		if k := bytes.Index(seg, []byte(`,"properties":{`)); k >= 0 {
			t, ok := topLevel(seg[k+len(`,"properties":`):], "t")
			if !ok || len(bytes.Trim(t, "-0123456789")) > 0 {
				cl.mirrorJSON(b) // (a "t" that is not a number)
				return
			}
			c.t = t
		}
		out = append(out, c)
	}
	cl.wmuMirror.Lock()
	defer cl.wmuMirror.Unlock()
	for _, c := range out {
		switch cur, ok := cl.world[string(c.id)]; {
		case c.remove:
			delete(cl.world, string(c.id))
		case len(c.t) > 0:
			if !ok || cur != string(c.t) {
				cl.world[string(c.id)] = string(c.t)
			}
		case !ok:
			cl.world[string(c.id)] = ""
		}
	}
	clear(out)
	cl.scanned = out[:0]
}

// topLevel returns the value of key in the JSON object at the start of
// obj (which holds no escaped string), nil if it has none; ok is false if
// obj is not an object as the node encodes one.
func topLevel(obj []byte, key string) (v []byte, ok bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return nil, false
	}
	i := 1
	for i < len(obj) {
		switch obj[i] {
		case '}':
			return nil, true
		case ',':
			i++
		}
		if i >= len(obj) || obj[i] != '"' {
			return nil, false
		}
		j := bytes.IndexByte(obj[i+1:], '"')
		if j < 0 || i+j+2 >= len(obj) || obj[i+j+2] != ':' {
			return nil, false
		}
		k := obj[i+1 : i+1+j]
		start := i + j + 3
		end := skipValue(obj, start)
		if end < 0 {
			return nil, false
		}
		if string(k) == key {
			return obj[start:end], true
		}
		i = end
	}
	return nil, false
}

// skipValue returns where the JSON value at obj[i] ends (no escaped
// strings), or -1.
func skipValue(obj []byte, i int) int {
	if i >= len(obj) {
		return -1
	}
	switch obj[i] {
	case '"':
		j := bytes.IndexByte(obj[i+1:], '"')
		if j < 0 {
			return -1
		}
		return i + j + 2
	case '{', '[':
		depth := 0
		for ; i < len(obj); i++ {
			switch obj[i] {
			case '"':
				j := bytes.IndexByte(obj[i+1:], '"')
				if j < 0 {
					return -1
				}
				i += j + 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(obj); i++ { // a number, true, false or null
		if obj[i] == ',' || obj[i] == '}' || obj[i] == ']' {
			return i
		}
	}
	return -1
}

// scanned is a change as mirror reads it: slices of the message.
type scanned struct {
	id, t  []byte
	remove bool
}

// mirrorJSON is mirror by decoding.
func (cl *client) mirrorJSON(b []byte) {
	var msg []json.RawMessage
	if json.Unmarshal(b, &msg) != nil || len(msg) != 2 {
		cl.st.fail(errors.New("a worldChange the client cannot decode"))
		return
	}
	var wc struct {
		Changes []struct {
			Type       string                     `json:"type"`
			ID         string                     `json:"id"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"changes"`
	}
	if json.Unmarshal(msg[1], &wc) != nil {
		cl.st.fail(errors.New("a worldChange the client cannot decode"))
		return
	}
	cl.wmuMirror.Lock()
	defer cl.wmuMirror.Unlock()
	for _, c := range wc.Changes {
		switch c.Type {
		case "remove":
			delete(cl.world, c.ID)
		default:
			if t, ok := c.Properties["t"]; ok {
				cl.world[c.ID] = string(t)
			} else if _, ok := cl.world[c.ID]; !ok {
				cl.world[c.ID] = ""
			}
		}
	}
}

// nodeObject is an object of the node's world, as the check sees it.
type nodeObject struct {
	t      string // its "t" property
	at     [3]float64
	placed bool
	room   string
}

// nodeWorld reads the node's world from its /api/state, presenting token
// (with authentication on, /api/state wants one with the admin claim).
func nodeWorld(wsURL, token string) (map[string]nodeObject, error) {
	api := strings.Replace(strings.Replace(wsURL, "wss://", "https://", 1), "ws://", "http://", 1)
	api = strings.TrimSuffix(api, "/ws") + "/api/state?limit=1000000"
	req, err := http.NewRequest(http.MethodGet, api, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading %s: %s (with authentication on, --check needs a token with the admin claim)", api, resp.Status)
	}
	var st struct {
		Objects []struct {
			ID         string                     `json:"id"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"objects"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", api, err)
	}
	node := make(map[string]nodeObject, len(st.Objects))
	for _, o := range st.Objects {
		no := nodeObject{t: string(o.Properties["t"])}
		json.Unmarshal(o.Properties["room"], &no.room) //nolint:errcheck // no room: ""
		var p []float64
		if json.Unmarshal(o.Properties["position"], &p) == nil && len(p) == 3 {
			no.at, no.placed = [3]float64(p), true
		}
		node[o.ID] = no
	}
	return node, nil
}

// checkMirrors compares every client's copy of the world with what the
// node holds for it: everything but its own object (a node never sends a
// client its own), within its interest box if it has one.
func checkMirrors(nodes map[string]map[string]nodeObject, cls []*client) (checked, inconsistent int) {
	for _, cl := range cls {
		if cl.idle {
			continue
		}
		node := nodes[cl.url]
		checked++
		want := 0
		cl.wmuMirror.Lock()
		bad := false
		for id, o := range node {
			if id == cl.obj || (cl.box != nil && o.placed && !cl.box.Contains(o.at, 0)) || (cl.room != "" && o.room != "" && o.room != cl.room) {
				continue
			}
			want++
			if t, ok := cl.world[id]; !ok || t != o.t {
				bad = true
				break
			}
		}
		if len(cl.world) != want {
			bad = true
		}
		cl.wmuMirror.Unlock()
		if bad {
			inconsistent++
		}
	}
	return checked, inconsistent
}

// startProgress prints a progress line every second while measuring.
func startProgress(cfg *config, st *stats, n int) (stop func()) {
	if !cfg.progress {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start := time.Now()
		var lastSent, lastDel int64
		for {
			select {
			case <-done:
				fmt.Fprintln(os.Stderr)
				return
			case <-t.C:
			}
			sent, del := st.sent.Load(), st.delivered.Load()
			fmt.Fprintf(os.Stderr, "\r%5.0fs  %d clients  %8d updates/s  %10d records/s  %d errors   ",
				time.Since(start).Seconds(), n, sent-lastSent, del-lastDel, st.errors.Load())
			lastSent, lastDel = sent, del
		}
	}()
	return func() { close(done) }
}

// printTable prints the summary.
func printTable(r report) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "connections\t%d\n", r.Clients)
	fmt.Fprintf(w, "measured\t%.1f s\n", r.Seconds)
	fmt.Fprintf(w, "updates sent\t%.0f /s\n", float64(r.Sent)/r.Seconds)
	fmt.Fprintf(w, "records delivered\t%.0f /s\n", r.DeliveredPerS)
	fmt.Fprintf(w, "bytes delivered\t%.0f /s\n", r.BytesPerS)
	fmt.Fprintf(w, "latency p50 / p95 / p99 / max\t%.1f / %.1f / %.1f / %.1f ms (%d samples, %d repeats)\n", r.P50ms, r.P95ms, r.P99ms, r.MaxMs, r.LatencySamples, r.Repeats)
	if r.NearP99ms > 0 || r.FarP99ms > 0 {
		fmt.Fprintf(w, "near p99; far p99 / max\t%.1f ms; %.1f / %.1f ms\n", r.NearP99ms, r.FarP99ms, r.FarMaxMs)
		fmt.Fprintf(w, "far staleness p99 / max\t%.1f / %.1f ms\n", r.FarStaleP99ms, r.FarStaleMaxMs)
		fmt.Fprintf(w, "far behind p99 / max\t%.1f / %.1f ms\n", r.FarBehindP99ms, r.FarBehindMaxMs)
	}
	fmt.Fprintf(w, "bytes per client\t%.0f /s\n", r.BytesPerClientPerS)
	if r.NodeCPUCores > 0 {
		fmt.Fprintf(w, "node CPU\t%.2f cores (%.2f ms per client-second, %.1f µs per record)\n", r.NodeCPUCores, r.NodeCPUPerClientMs, r.NodeCPUPerRecordUs)
		fmt.Fprintf(w, "node RSS (peak)\t%.0f MiB\n", r.NodeRSSMiB)
	}
	fmt.Fprintf(w, "repairs\t%.0f\n", r.Repairs)
	fmt.Fprintf(w, "errors\t%d\n", r.Errors)
	fmt.Fprintf(w, "reconnects\t%d\n", r.Reconnects)
	fmt.Fprintf(w, "dial retries\t%d\n", r.DialRetries)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error\t%s\n", r.FirstError)
	}
	if r.Checked > 0 {
		fmt.Fprintf(w, "consistency\t%d of %d clients hold the node's world\n", r.Checked-r.Inconsistent, r.Checked)
	}
	printBridged(w, r)
	w.Flush()
}

// churn connects a client that owns one object, keeps it a moment and
// leaves, over and over, until ctx ends.
func churn(ctx context.Context, cfg *config, k int, st *stats) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("churn-%08d-%08d", os.Getpid()%100000000, k*100000+i%100000)
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, _, err := websocket.Dial(dctx, cfg.url, cfg.dialOpts)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			st.dialRetries.Add(1)
			st.firstDial.CompareAndSwap(nil, "churn: "+err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(250*time.Millisecond + rand.N(250*time.Millisecond)):
			}
			continue
		}
		stay := time.After(time.Duration(500+k*37%1500) * time.Millisecond)
		read := make(chan []byte, 16)
		go func() {
			defer close(read)
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				read <- b
			}
		}()
	loop:
		for {
			select {
			case b, ok := <-read:
				if !ok {
					break loop
				}
				switch {
				case bytes.HasPrefix(b, []byte(`["requestMetadata"`)):
					c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `["metadataChange",{"identifier":"%s","identifierChain":["%s"]}]`, id, id))
				case bytes.HasPrefix(b, []byte(`["requestRefresh"`)):
					// With --interest a joining user appears somewhere in
					// the world, seen by those around it.
					props := `"churn":true`
					if cfg.interest > 0 {
						props += fmt.Sprintf(`,"position":[%g,0,%g]`, float64((k*7+i*13)%cfg.side)*cfg.spacing, float64((k*11+i*5)%cfg.side)*cfg.spacing)
					}
					c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `["worldChange",{"timestamp":%d,"changes":[{"type":"add","id":"%s-obj","owner":"%s","properties":{%s}}]}]`, time.Now().UnixMilli(), id, id, props))
				}
			case <-stay:
				break loop
			case <-ctx.Done():
				break loop
			}
		}
		c.Close(websocket.StatusNormalClosure, "bye")
	}
}

// stall connects a client that answers the handshake and then stops
// reading.
func stall(ctx context.Context, cfg *config, k int) {
	id := fmt.Sprintf("stalled-%08d-%08d", os.Getpid()%100000000, k)
	c, _, err := websocket.Dial(ctx, cfg.url, cfg.dialOpts)
	if err != nil {
		return
	}
	defer c.CloseNow()
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		if bytes.HasPrefix(b, []byte(`["requestMetadata"`)) {
			c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `["metadataChange",{"identifier":"%s","identifierChain":["%s"]}]`, id, id))
			break
		}
	}
	<-ctx.Done() // and never read again
}

// profileCPU starts writing the tool's CPU profile to path; stop ends it.
func profileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// blockOf returns which of parts nodes serves client i of n on a grid
// side wide (row i/side, column i%side): the grid is cut into parts
// blocks, as near square as the number allows (4 as 2 × 2, 6 as 3 rows ×
// 2 columns, a prime as rows), so that each node's part has the least
// border with the others' for its size: what crosses between nodes is
// what clients see across those borders.
func blockOf(i, n, side, parts int) int {
	across := 1 // blocks across the columns; parts/across down the rows
	for a := 1; a*a <= parts; a++ {
		if parts%a == 0 {
			across = a
		}
	}
	down := parts / across
	rows := (n + side - 1) / side
	if rows < 2*down || side < across {
		// Too few rows for every block to hold one whole: contiguous
		// runs of clients, rows of the grid.
		return i * parts / n
	}
	row, col := i/side, i%side
	return (row*down/rows)*across + col*across/side
}
