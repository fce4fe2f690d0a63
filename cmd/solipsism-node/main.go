package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/bridge/snapshot"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/enet"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/store"
	"github.com/solipsism/mesh/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := ""
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	var err error
	switch cmd {
	case "export", "import":
		err = runBackup(cmd, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	case "token":
		err = runToken(os.Args[2:], time.Now(), os.Stdout, os.Stderr)
	case "version", "--version", "-version":
		printVersion(os.Stdout)
	default:
		err = run(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "solipsism-node:", err)
		os.Exit(1)
	}
}

// debugMux serves net/http/pprof. It is mounted only on the --debug-listen
// listener: profiles reveal memory contents and cost CPU to take, so they
// never share the public listener.
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// cmdline is pprof.Cmdline with the values of secret flags redacted: an
// admin token must not reveal the key that signs tokens.
func cmdline(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}

// run starts the node and serves until ctx is done.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stderr io.Writer) error {
	cfg, err := parseConfig(args, lookupEnv, stderr)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoMetric())
	authn, err := cfg.authenticator()
	if err != nil {
		return err
	}
	dial, err := cfg.dialOptions()
	if err != nil {
		return err
	}
	var st store.Store
	if cfg.dataDir != "" {
		b, err := store.OpenBolt(cfg.dataDir)
		if err != nil {
			return err
		}
		defer b.Close() // after the node's last write
		st = b
		log.Info("keeping the world in the store", "file", b.Path())
	}
	opts := relay.Options{
		Store: st,
		Auth:  authn, Quotas: cfg.quotas, Priority: cfg.priority, Transfers: cfg.transfers,
		Role: cfg.role, Prefix: cfg.prefix, Tick: cfg.nodeTick(),
		Limits:   peer.Limits{MaxRecordBytes: int(cfg.readLimit)},
		ReadRate: int(cfg.readRate), OriginPatterns: cfg.origins,
		ReclaimGrace: cfg.nodeGrace(), Interest: cfg.interest, DigestInterval: cfg.nodeDigest(),
		StallTimeout: cfg.stall, PingInterval: cfg.ping,
		Logger: log, Registerer: reg,
	}
	if cfg.schemas != nil {
		opts.Validator = cfg.schemas
		log.Info("checking writes against property schemas", "file", cfg.schemasFile, "kinds", cfg.schemas.Kinds())
	}
	node, err := relay.New(opts)
	if err != nil {
		return err
	}

	firstRev := revisionLease(node)
	allo, err := alloverse.New(node, alloverse.Options{
		Auth: authn, FirstRevision: firstRev,
		Heartbeat: cfg.alloHeartbeat, History: cfg.alloHistory, PatchStyle: cfg.alloStyle,
		PlaceName: cfg.placeName, ViewRadius: cfg.alloView, Logger: log,
	})
	if err != nil {
		return err
	}
	defer allo.Close()
	go keepRevisionLease(ctx, node, allo, firstRev)
	if cfg.alloENet != "" {
		eh, err := enet.Listen(cfg.alloENet, enet.Options{})
		if err != nil {
			return fmt.Errorf("--alloverse-enet: %w", err)
		}
		defer eh.Close()
		go allo.ServeENet(eh) //nolint:errcheck // returns when the host closes
		log.Info("serving Alloverse clients over ENet", "udp", eh.Addr().String())
	}
	if cfg.snapListen != "" {
		snap, err := snapshot.Listen(node, cfg.snapListen, snapshot.Options{Rate: cfg.snapRate, MaxKbps: cfg.snapMaxKbps, Near: cfg.priority.Near, Auth: authn, Logger: log})
		if err != nil {
			return fmt.Errorf("--snapshot-listen: %w", err)
		}
		defer snap.Close()
		log.Info("serving snapshots", "udp", snap.Addr().String(), "rate", cfg.snapRate)
	}

	rctx, stopReclaim := context.WithCancel(context.Background())
	defer stopReclaim()
	// (A scope's element costs far less than an object, but its flood
	// leaves as much garbage behind: it counts as one.)
	rec := &reclaimer{load: func() int { return node.World().Len() + node.World().Elements() + len(node.Links()) }, minPeak: 4096}
	defer node.World().Subscribe(func(gameworld.Applied) {
		objects, _ := node.World().Size() // (no lock: this runs under the node's, for every change)
		rec.observe(objects + node.World().Elements())
	})()
	go rec.run(rctx, 2*time.Second)

	mux := http.NewServeMux()
	mux.Handle("/ws", node)
	mux.Handle("/alloverse", allo.Handler(alloverse.HandlerOptions{ReadLimit: cfg.readLimit, OriginPatterns: cfg.origins}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(struct {
			Status     string            `json:"status"`
			Identifier string            `json:"identifier"`
			Role       string            `json:"role"`
			Mesh       *relay.MeshStatus `json:"mesh,omitempty"`
		}{"serving", node.Identifier(), node.Role().String(), node.MeshStatus()})
	})
	// /readyz: whether the node can do its job (for load balancers and
	// orchestrators), with the reasons when it cannot; /healthz only says
	// the process serves.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ready, reasons := node.Readiness()
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if reasons == nil {
			reasons = []string{}
		}
		json.NewEncoder(w).Encode(struct {
			Ready      bool     `json:"ready"`
			Reasons    []string `json:"reasons"`
			Identifier string   `json:"identifier"`
			Role       string   `json:"role"`
		}{ready, reasons, node.Identifier(), node.Role().String()})
	})
	mux.Handle("/metrics", adminOnly(authn, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.Handle("/api/state", adminOnly(authn, api.StateHandler(node)))
	mux.Handle("/api/messages", adminOnly(authn, api.MessagesHandler(node)))
	mux.Handle("/api/alloverse", adminOnly(authn, allo.StateHandler()))
	pages := web.HandlerWith(web.Options{TokenURL: cfg.tokenURL, ICEServers: cfg.iceServers, OriginPatterns: cfg.origins})
	mux.Handle("/inspect", adminOnly(authn, pages))
	mux.Handle("/inspect/", adminOnly(authn, pages))
	mux.Handle("/", pages)

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	// net/http's own errors (TLS handshakes, bad requests) go through our
	// logger, in its format.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 2)
	go func() {
		if cfg.tlsCert != "" {
			errc <- srv.ServeTLS(ln, cfg.tlsCert, cfg.tlsKey)
			return
		}
		errc <- srv.Serve(ln)
	}()
	web, ws := serveURLs(ln.Addr(), cfg.tlsCert != "")
	meshMode := "off"
	switch {
	case cfg.meshBind != "" && len(cfg.meshSecret) > 0:
		meshMode = "encrypted"
	case cfg.meshBind != "":
		meshMode = "unencrypted"
	}
	log.Info("serving", "addr", ln.Addr().String(), "url", web, "ws", ws, "tls", cfg.tlsCert != "", "auth", authn != nil, "mesh", meshMode,
		"role", cfg.role.String(), "identifier", node.Identifier(), "store", cfg.dataDir != "", "tick", cfg.tick.String())
	if len(cfg.secretsOnCommandLine) > 0 {
		log.Warn("secrets on the command line are visible to every user of this machine (ps, /proc); give them in files (--auth-key-file, --mesh-secret-file, --upstream-token-file) or the environment",
			"flags", strings.Join(cfg.secretsOnCommandLine, ","))
	}
	if cfg.upstreamToken != "" && authn == nil {
		log.Warn("this proxy presents a token upstream but checks none itself (no --auth-key): anyone who reaches it acts under its token's grants; see docs/security.md")
	}

	if cfg.debug != "" {
		dln, err := net.Listen("tcp", cfg.debug)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen on --debug-listen %s: %w", cfg.debug, err)
		}
		dsrv := &http.Server{Handler: adminOnly(authn, debugMux()), ReadHeaderTimeout: 10 * time.Second}
		go dsrv.Serve(dln)
		defer dsrv.Close()
		log.Info("serving debug endpoints", "addr", dln.Addr().String(), "pprof", "/debug/pprof/")
	}

	var mesh *cluster.Mesh
	if cfg.meshBind != "" {
		adv, err := cfg.meshAdvertise(ln.Addr().String())
		if err != nil {
			ln.Close()
			return err
		}
		mesh, err = cluster.Join(node, cluster.Options{
			BindAddr: cfg.meshBind, AdvertiseURL: adv, Join: cfg.join,
			SecretKey: cfg.meshSecret, Label: cfg.meshLabel, Profile: cfg.meshProfile, Dial: dial,
		})
		if err != nil {
			ln.Close()
			return err
		}
	}

	if cfg.upstream != "" {
		go func() {
			up := dial
			if cfg.upstreamToken != "" {
				up.Header = http.Header{"Authorization": {"Bearer " + cfg.upstreamToken}}
			}
			errc <- node.RunUpstream(ctx, relay.UpstreamOptions{URL: cfg.upstream, MinBackoff: cfg.backoffMin, MaxBackoff: cfg.backoffMax, Dial: up})
		}()
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	if cfg.drain > 0 && err == nil {
		// Send the clients elsewhere first (the other members), so that
		// none waits on a dead connection and none of their objects
		// blinks out for the others.
		dctx, dcancel := context.WithTimeout(context.Background(), cfg.drain+time.Second)
		if derr := node.Drain(dctx, relay.DrainOptions{Grace: cfg.drain}); derr != nil {
			log.Warn("draining", "err", derr)
		}
		dcancel()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if mesh != nil {
		if merr := mesh.Close(); merr != nil {
			log.Warn("leaving the mesh", "err", merr)
		}
	}
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("http shutdown", "err", serr)
	}
	if cerr := node.Close(sctx); cerr != nil {
		log.Warn("node shutdown", "err", cerr)
	}
	return err
}

// serveURLs returns the URLs a listener serves the demo and the protocol
// at, as a user would type them (localhost for all interfaces).
func serveURLs(addr net.Addr, tls bool) (web, ws string) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String(), addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	hp := net.JoinHostPort(host, port)
	if tls {
		return "https://" + hp + "/", "wss://" + hp + "/ws"
	}
	return "http://" + hp + "/", "ws://" + hp + "/ws"
}
