package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/schema"
	"github.com/solipsism/mesh/web"
)

// config is the parsed command line.
type config struct {
	listen     string
	role       ownership.Role
	prefix     string
	tick       time.Duration
	readLimit  int64
	readRate   int64
	origins    []string
	logLevel   slog.Level
	logFormat  string
	upstream   string
	backoffMin time.Duration
	backoffMax time.Duration
	stall      time.Duration
	ping       time.Duration
	debug      string
	grace      time.Duration
	drain      time.Duration
	digest     time.Duration
	dataDir    string

	alloHeartbeat time.Duration
	alloHistory   int
	alloView      float64
	alloStyle     alloverse.PatchStyle
	placeName     string
	interest      []peer.Box
	quotas        relay.Quotas
	priority      relay.PriorityOptions
	transfers     ownership.Policy
	alloENet      string
	authKey       string
	tokenURL      string
	// iceServers are --ice-servers, for the pages' WebRTC media.
	iceServers []web.ICEServer
	// schemas are the property schemas of --schemas; nil without.
	schemas       *schema.Set
	schemasFile   string
	upstreamToken string
	tlsCert       string
	tlsKey        string
	tlsCA         string
	snapListen    string
	snapRate      int
	snapMaxKbps   int

	// secretsOnCommandLine names the secret flags given as arguments
	// (readable by every local user), for a warning at start.
	secretsOnCommandLine []string

	meshBind     string
	join         []string
	meshSecret   []byte
	meshLabel    string
	meshProfile  string
	advertiseURL string
}

// parseBox parses x0,y0,z0,x1,y1,z1.
func parseBox(s string) (peer.Box, error) {
	f := strings.Split(strings.TrimSpace(s), ",")
	if len(f) != 6 {
		return peer.Box{}, fmt.Errorf("want x0,y0,z0,x1,y1,z1, got %q", s)
	}
	var v [6]float64
	for i, x := range f {
		n, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || math.IsNaN(n) {
			return peer.Box{}, fmt.Errorf("want six numbers, got %q", s)
		}
		v[i] = n
	}
	b := peer.Box{Min: [3]float64{v[0], v[1], v[2]}, Max: [3]float64{v[3], v[4], v[5]}}
	for i := range 3 {
		if b.Min[i] > b.Max[i] {
			return peer.Box{}, fmt.Errorf("min above max in %q", s)
		}
	}
	return b, nil
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "SOLIPSISM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig parses args, filling flags not given from the environment
// (lookupEnv is os.LookupEnv or a stand-in): a variable set, even to
// nothing, counts as the flag given that value (SOLIPSISM_DATA_DIR= is
// --data-dir "").
func parseConfig(args []string, lookupEnv func(string) (string, bool), out io.Writer) (config, error) {
	fs := flag.NewFlagSet("solipsism-node", flag.ContinueOnError)
	fs.SetOutput(out)
	var (
		c                             config
		role, origins, level, readLim string
		readRate                      string
		join, secret                  string
		alloStyle                     string
		transfers                     string
		authKeyFile, meshSecretFile   string
		upstreamTokenFile             string
		worldBytes, clientBytes       string
		iceServers                    string
	)
	fs.StringVar(&c.listen, "listen", ":8080", "HTTP listen address")
	fs.StringVar(&role, "role", "server", "node role: server or proxy")
	fs.StringVar(&c.dataDir, "data-dir", "solipsism-data", "directory of the node's store: its identifier and durable objects (persistent ones, and its own) survive restarts and crashes; created if missing; \"\" keeps everything in memory")
	fs.StringVar(&transfers, "transfers", "marked", "which objects clients may take ownership of: marked (\"transferable\": true, or persistent), all (unless \"transferable\": false) or none; every node of a mesh should agree")
	fs.StringVar(&c.prefix, "prefix", "", "prefix of the node's world identifier (default: the role)")
	fs.DurationVar(&c.tick, "tick", peer.DefaultTick, "how often each link flushes its coalesced changes; 0 sends immediately")
	fs.StringVar(&readLim, "read-limit", "1MiB", "largest change record, or message of another type (bytes, or with KiB/MiB); a worldChange may carry any number of records")
	fs.StringVar(&readRate, "read-rate", "16MiB", "how fast each link is read, per second (bytes, or with KiB/MiB); faster peers are slowed, not cut off")
	fs.StringVar(&origins, "origin", "", "comma-separated browser origin host patterns allowed besides same-origin ('*' for any)")
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.upstream, "upstream", "", "proxy role: ws:// or wss:// URL of the upstream server or proxy")
	fs.DurationVar(&c.backoffMin, "backoff-min", 100*time.Millisecond, "first reconnect delay toward the upstream")
	fs.DurationVar(&c.backoffMax, "backoff-max", 5*time.Second, "longest reconnect delay toward the upstream")
	fs.DurationVar(&c.stall, "stall-timeout", peer.DefaultStallTimeout, "close a link whose peer has not read for this long (its queue keeps only the latest state per object meanwhile)")
	fs.DurationVar(&c.ping, "ping-interval", peer.DefaultPingInterval, "how often each link pings its peer to find dead connections")
	fs.DurationVar(&c.grace, "reclaim-grace", relay.DefaultReclaimGrace, "how long the objects of a peer whose connection broke are kept for it to reconnect; 0 removes them at once")
	fs.DurationVar(&c.drain, "drain-grace", 5*time.Second, "on SIGTERM, how long clients have to move to another member (they are sent its URL) before the node closes their links; 0 closes them at once")
	fs.DurationVar(&c.digest, "digest-interval", relay.DefaultDigestInterval, "how often each link to a peer that speaks anti-entropy (our nodes and Go clients) is sent a digest of what it was sent, to find and repair divergence; 0 turns it off")
	fs.StringVar(&c.debug, "debug-listen", "", "host:port for net/http/pprof (e.g. 127.0.0.1:6060); off when empty, never on --listen")
	fs.DurationVar(&c.alloHeartbeat, "allo-heartbeat", alloverse.DefaultHeartbeat, "how often Alloverse clients (/alloverse) are sent the world's state")
	fs.IntVar(&c.alloHistory, "allo-history", alloverse.DefaultHistory, "how many revisions back an Alloverse client's acknowledgement still gets a diff instead of a full set")
	fs.StringVar(&alloStyle, "allo-patch-style", "smallest", "form of Alloverse diffs: smallest (of merge and apply), merge or apply")
	fs.Float64Var(&c.alloView, "allo-view-radius", 0, "send each announced Alloverse client only the entities within this distance of its avatar (on every axis), those without a place, and its own; 0: the whole world")
	fs.StringVar(&c.placeName, "place-name", alloverse.DefaultPlaceName, "the place's name, as Alloverse clients are told")
	fs.Func("interest", "proxy: region x0,y0,z0,x1,y1,z1 it wants of its upstream (repeatable; several separated by ';' in the environment); default: the union of its clients' regions", func(v string) error {
		for _, part := range strings.Split(v, ";") {
			b, err := parseBox(part)
			if err != nil {
				return err
			}
			c.interest = append(c.interest, b)
		}
		return nil
	})
	fs.IntVar(&c.quotas.ConnectionsPerIP, "max-conns-per-ip", 256, "downstream WebSocket connections from one address (HTTP 429 beyond); -1 for no limit")
	fs.Float64Var(&c.quotas.MessagesPerSecond, "max-msgs-per-sec", 500, "messages read per second per link (faster peers are read slower); -1 for no limit")
	fs.Float64Var(&c.quotas.RecordsPerSecond, "max-records-per-sec", 120000, "change records read per second per link (two writers of 1,000 objects at 60 Hz); -1 for no limit")
	fs.IntVar(&c.quotas.ObjectsPerOwner, "max-objects-per-owner", 100000, "objects one world identifier may own (further adds are refused); -1 for no limit")
	fs.IntVar(&c.quotas.PropertiesPerObject, "max-props-per-object", 1024, "properties per object; -1 for no limit")
	fs.IntVar(&c.quotas.ValueBytes, "max-value-bytes", 256<<10, "bytes of one property value; -1 for no limit")
	fs.IntVar(&c.quotas.ObjectBytes, "max-object-bytes", 4<<20, "bytes of all an object's properties; -1 for no limit")
	fs.IntVar(&c.quotas.ScopeElements, "max-scope-elements", 1<<16, "elements of one scope of an object (a grid's blocks); -1 for no limit")
	fs.IntVar(&c.quotas.ScopeBytes, "max-scope-bytes", 896<<10, "bytes of one scope as a JSON object, which peers without scopes get as one property; -1 for no limit")
	fs.IntVar(&c.quotas.WorldObjects, "max-world-objects", 500000, "objects the node accepts from its upstream and mesh members (further new ones are refused); -1 for no limit")
	fs.StringVar(&worldBytes, "max-world-bytes", "256MiB", "bytes of properties the node accepts from its upstream and mesh members (bytes, or with KiB/MiB/GiB); -1 for no limit")
	fs.Float64Var(&c.priority.Near, "priority-near", 0, "clients with a region are sent the changes of objects this near its centre every tick, and each doubling of the distance beyond half as often (never dropped: the latest value follows); snapshot clients get near ghosts' changes first when a packet cannot hold them all; 0: everything every tick")
	fs.IntVar(&c.priority.Bands, "priority-bands", 4, "bands of distance for --priority-near: the farthest is sent every 2^(bands-1) ticks")
	fs.StringVar(&clientBytes, "max-client-bytes", "0", "most bytes per second of changes sent to one client with a region (bytes, or with KiB/MiB); nearer objects first, the rest waits; a client may ask for less (metadata \"budget\"); 0: no cap")
	fs.StringVar(&c.authKey, "auth-key", "", "turns authentication on: peers must present a JWT signed with this key (an HS256 secret of 32+ bytes in hex or base64, or ed25519:<base64 public key>); see docs/security.md")
	fs.StringVar(&c.upstreamToken, "upstream-token", "", "proxy: the token presented to an upstream that wants one")
	fs.StringVar(&iceServers, "ice-servers", "", `STUN/TURN servers for the pages' voice (WebRTC), a JSON list as RTCPeerConnection takes it, e.g. '[{"urls":"stun:stun.example.org:3478"}]'; told to the pages at /config.json; empty: none (peers on one network still connect)`)
	fs.StringVar(&c.schemasFile, "schemas", "", "a file of property schemas per object kind (JSON Schema; see docs/protocol.md): writes that break them are refused with the reason; docs/demo-schemas.json has the demo's")
	fs.StringVar(&c.tokenURL, "token-url", "", "with --auth-key: where the node's own pages (/, /2d, /naf.html) get a token before each connection, a GET answered with a token as text (your login service's; see docs/security.md); told to them at /config.json")
	fs.StringVar(&authKeyFile, "auth-key-file", "", "a file holding --auth-key (kept out of the command line, which every local user can read)")
	fs.StringVar(&upstreamTokenFile, "upstream-token-file", "", "a file holding --upstream-token")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate: serve https:// and wss:// (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM CA certificates trusted for wss:// upstreams and mesh links, besides the system's")
	fs.StringVar(&c.alloENet, "alloverse-enet", "", "UDP host:port serving native Alloverse clients over ENet (allonet's default place port is 21337); off when empty")
	fs.StringVar(&c.snapListen, "snapshot-listen", "", "UDP host:port serving binary snapshots to game engines; off when empty")
	fs.IntVar(&c.snapRate, "snapshot-rate", 60, "snapshots per second sent to each UDP client")
	fs.IntVar(&c.snapMaxKbps, "snapshot-max-kbps", 0, "most kilobits a second of snapshots sent to each UDP client; 0: a 1,200-byte packet a tick")
	fs.StringVar(&c.meshBind, "mesh-bind", "", "server role: host:port for mesh membership (memberlist, UDP and TCP); empty runs a single node")
	fs.StringVar(&join, "join", "", "comma-separated host:port of mesh members to join")
	fs.StringVar(&secret, "mesh-secret", "", "32-byte key, hex or base64, that encrypts mesh gossip and authenticates mesh links")
	fs.StringVar(&meshSecretFile, "mesh-secret-file", "", "a file holding --mesh-secret")
	fs.StringVar(&c.meshLabel, "mesh-label", "", "mesh label; only members with the same label talk to each other")
	fs.StringVar(&c.meshProfile, "mesh-profile", "lan", "mesh failure-detection timing: lan, local or wan")
	fs.StringVar(&c.advertiseURL, "advertise-url", "", "ws:// URL other mesh members dial to reach this node (default: from --listen or --mesh-bind)")
	fs.Usage = func() { printUsage(fs, out) }
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				shown := fmt.Sprintf("%q", v)
				if secretFlags[f.Name] {
					shown = "(secret, not shown)"
				}
				envErr = errors.Join(envErr, fmt.Errorf("%s=%s (--%s): %w%s", envName(f.Name), shown, f.Name, err, expect(f)))
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	for _, sf := range []struct {
		name, file string
		v          *string
	}{{"auth-key", authKeyFile, &c.authKey}, {"mesh-secret", meshSecretFile, &secret}, {"upstream-token", upstreamTokenFile, &c.upstreamToken}} {
		if sf.file == "" {
			continue
		}
		if *sf.v != "" {
			return c, fmt.Errorf("--%s and --%s-file: give one of them", sf.name, sf.name)
		}
		b, err := os.ReadFile(sf.file)
		if err != nil {
			return c, fmt.Errorf("--%s-file: %w", sf.name, err)
		}
		if *sf.v = strings.TrimSpace(string(b)); *sf.v == "" {
			return c, fmt.Errorf("--%s-file: %s is empty", sf.name, sf.file)
		}
	}
	c.secretsOnCommandLine = secretArgs(args)
	var err error
	if c.role, err = ownership.ParseRole(role); err != nil || c.role == ownership.Client {
		return c, fmt.Errorf("--role: want server or proxy, got %q", role)
	}
	if c.transfers, err = ownership.ParsePolicy(transfers); err != nil {
		return c, fmt.Errorf("--transfers: %w", err)
	}
	if c.readLimit, err = parseSize(readLim, math.MaxInt32); err != nil {
		return c, fmt.Errorf("--read-limit: %w", err)
	}
	if c.readRate, err = parseSize(readRate, math.MaxInt32); err != nil {
		return c, fmt.Errorf("--read-rate: %w", err)
	}
	if v := strings.TrimSpace(clientBytes); v != "0" && v != "" {
		cb, err := parseSize(v, math.MaxInt32)
		if err != nil {
			return c, fmt.Errorf("--max-client-bytes: %w", err)
		}
		c.priority.MaxBytesPerSecond = int(cb)
	}
	if c.priority.Near < 0 || c.priority.Bands < 1 || c.priority.Bands > 16 {
		return c, fmt.Errorf("--priority-near must not be negative, --priority-bands within 1 to 16")
	}
	if strings.TrimSpace(worldBytes) == "-1" {
		c.quotas.WorldBytes = -1
	} else if c.quotas.WorldBytes, err = parseSize(worldBytes, math.MaxInt64); err != nil {
		return c, fmt.Errorf("--max-world-bytes: %w", err)
	}
	if c.alloStyle, err = alloverse.ParsePatchStyle(alloStyle); err != nil {
		return c, fmt.Errorf("--allo-patch-style: %w", err)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if c.interest != nil && c.role != ownership.Proxy {
		return c, fmt.Errorf("--interest: only a proxy announces a region to an upstream")
	}
	if c.snapRate <= 0 || c.snapRate > 1000 {
		return c, fmt.Errorf("--snapshot-rate: want 1 to 1000, got %d", c.snapRate)
	}
	if c.snapMaxKbps < 0 {
		return c, fmt.Errorf("--snapshot-max-kbps: want 0 (no bound) or more, got %d", c.snapMaxKbps)
	}
	if c.alloHeartbeat <= 0 || c.alloHistory <= 0 {
		return c, fmt.Errorf("--allo-heartbeat and --allo-history must be positive")
	}
	if c.alloView < 0 || math.IsNaN(c.alloView) || math.IsInf(c.alloView, 0) {
		return c, fmt.Errorf("--allo-view-radius: want 0 (off) or a positive distance, got %v", c.alloView)
	}
	if c.tick < 0 {
		return c, fmt.Errorf("--tick: must not be negative")
	}
	if c.grace < 0 {
		return c, fmt.Errorf("--reclaim-grace: must not be negative")
	}
	if c.drain < 0 {
		return c, fmt.Errorf("--drain-grace: must not be negative")
	}
	if c.digest < 0 {
		return c, fmt.Errorf("--digest-interval: must not be negative")
	}
	if c.stall <= 0 || c.ping <= 0 {
		return c, fmt.Errorf("--stall-timeout and --ping-interval must be positive")
	}
	if err := c.logLevel.UnmarshalText([]byte(level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, fmt.Errorf("--log-format: want text or json, got %q", c.logFormat)
	}
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.origins = append(c.origins, o)
		}
	}
	if iceServers != "" {
		if c.iceServers, err = web.ParseICEServers(iceServers); err != nil {
			return c, fmt.Errorf("--ice-servers: %w", err)
		}
	}
	if c.schemasFile != "" {
		if c.schemas, err = schema.Load(c.schemasFile); err != nil {
			return c, fmt.Errorf("--schemas: %w", err)
		}
	}
	if c.tokenURL != "" {
		if u, err := url.Parse(c.tokenURL); err != nil || !(u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "" && strings.HasPrefix(u.Path, "/")) {
			return c, fmt.Errorf("--token-url: want an http(s) URL or a path on this node, got %q", c.tokenURL)
		}
	}
	if c.tokenURL != "" && c.authKey == "" {
		// The pages would fetch tokens that nothing checks, and a
		// misplaced flag (meant for another node) would go unnoticed.
		return c, errors.New("--token-url is for a node that requires tokens: give --auth-key (or --auth-key-file) too, or drop --token-url")
	}
	if c.role == ownership.Proxy && c.upstream == "" {
		return c, errors.New("--role proxy needs --upstream ws://host:port/ws")
	}
	if c.upstream != "" && !strings.HasPrefix(c.upstream, "ws://") && !strings.HasPrefix(c.upstream, "wss://") {
		return c, fmt.Errorf("--upstream: want a ws:// or wss:// URL, got %q", c.upstream)
	}
	if c.upstream != "" && c.role != ownership.Proxy {
		return c, errors.New("--upstream is for --role proxy")
	}
	if c.backoffMin <= 0 || c.backoffMax < c.backoffMin {
		return c, errors.New("--backoff-min must be positive and at most --backoff-max")
	}
	for _, j := range strings.Split(join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			c.join = append(c.join, j)
		}
	}
	if c.meshBind == "" && (len(c.join) > 0 || secret != "" || c.meshLabel != "" || c.advertiseURL != "") {
		return c, errors.New("--join, --mesh-secret, --mesh-label and --advertise-url need --mesh-bind")
	}
	if c.meshBind != "" && c.role != ownership.Server {
		return c, errors.New("--mesh-bind is for --role server")
	}
	if secret != "" {
		if c.meshSecret, err = parseKey(secret); err != nil {
			return c, fmt.Errorf("--mesh-secret: %w", err)
		}
	}
	if c.advertiseURL != "" && !strings.HasPrefix(c.advertiseURL, "ws://") && !strings.HasPrefix(c.advertiseURL, "wss://") {
		return c, fmt.Errorf("--advertise-url: want a ws:// or wss:// URL, got %q", c.advertiseURL)
	}
	switch c.meshProfile {
	case "lan", "local", "wan":
	default:
		return c, fmt.Errorf("--mesh-profile: want lan, local or wan, got %q", c.meshProfile)
	}
	return c, nil
}

// secretFlags are the flags whose values are secrets: never printed, and
// kept out of /debug/pprof/cmdline.
var secretFlags = map[string]bool{"auth-key": true, "mesh-secret": true, "upstream-token": true}

// secretArgs returns the secret flags that args give a value.
func secretArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if name, ok := secretFlagOf(a); ok {
			out = append(out, "--"+name)
		}
	}
	return out
}

// secretFlagOf reports whether the argument a names a secret flag
// ("--auth-key", "-auth-key=…"), and which.
func secretFlagOf(a string) (string, bool) {
	if !strings.HasPrefix(a, "-") {
		return "", false
	}
	name := strings.TrimLeft(a, "-")
	name, _, _ = strings.Cut(name, "=")
	return name, secretFlags[name]
}

// redactArgs returns args with the values of secret flags replaced.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	hide := false
	for i, a := range args {
		switch name, secret := secretFlagOf(a); {
		case hide:
			out[i], hide = "<redacted>", false
		case secret && strings.Contains(a, "="):
			out[i] = a[:strings.Index(a, "=")+1] + "<redacted>"
		case secret:
			out[i], hide = a, true
			_ = name
		default:
			out[i] = a
		}
	}
	return out
}

// parseKey accepts a 16-, 24- or 32-byte key written in hex or base64.
func parseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && validKeyLen(len(b)) {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && validKeyLen(len(b)) {
			return b, nil
		}
	}
	return nil, errors.New("want a 32-byte key (16 or 24 also work) in hex or base64, e.g. from: openssl rand -hex 32")
}

func validKeyLen(n int) bool { return n == 16 || n == 24 || n == 32 }

// meshAdvertise returns the URL other members dial: --advertise-url, or
// ws://host:port/ws from the listener when it names a host, or from the
// mesh bind host.
func (c config) meshAdvertise(listenAddr string) (string, error) {
	if c.advertiseURL != "" {
		return c.advertiseURL, nil
	}
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		bindHost, _, _ := net.SplitHostPort(c.meshBind)
		if bip := net.ParseIP(bindHost); bindHost == "" || (bip != nil && bip.IsUnspecified()) {
			return "", errors.New("cannot tell other mesh members how to reach this node: set --advertise-url (or listen on, or bind the mesh to, a specific address)")
		}
		host = bindHost
	}
	return "ws://" + net.JoinHostPort(host, port) + "/ws", nil
}

// nodeDigest is --digest-interval as relay.Options wants it.
func (c config) nodeDigest() time.Duration {
	if c.digest == 0 {
		return -1
	}
	return c.digest
}

// nodeGrace maps the flag's "0 removes at once" to the Options convention.
func (c config) nodeGrace() time.Duration {
	if c.grace == 0 {
		return -1
	}
	return c.grace
}

// nodeTick maps the flag's "0 means immediately" to the Options convention.
func (c config) nodeTick() time.Duration {
	if c.tick == 0 {
		return peer.Immediate
	}
	return c.tick
}

// parseSize parses a positive size of at most most bytes, with an optional
// unit.
func parseSize(s string, most int64) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 || n > most/mult {
		return 0, fmt.Errorf("want a positive size of at most %d bytes, such as 1048576 or 1MiB", most)
	}
	return n * mult, nil
}

func newLogger(c config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// authenticator returns the --auth-key authenticator, or nil.
func (c config) authenticator() (auth.Authenticator, error) {
	if c.authKey == "" {
		return nil, nil
	}
	if pub, ok := strings.CutPrefix(c.authKey, "ed25519:"); ok {
		k, err := base64.StdEncoding.DecodeString(pub)
		if err != nil {
			return nil, fmt.Errorf("--auth-key: the Ed25519 public key is not base64: %w", err)
		}
		a, err := auth.NewEd25519(k)
		if err != nil {
			return nil, fmt.Errorf("--auth-key: %w", err)
		}
		return a, nil
	}
	k, err := hmacSecret(c.authKey)
	if err != nil {
		return nil, fmt.Errorf("--auth-key: %w", err)
	}
	a, err := auth.NewHS256(k)
	if err != nil {
		return nil, fmt.Errorf("--auth-key: %w", err)
	}
	return a, nil
}

// dialOptions returns how upstream and mesh links dial: with --tls-ca's
// certificates trusted besides the system's.
func (c config) dialOptions() (peer.DialOptions, error) {
	if c.tlsCA == "" {
		return peer.DialOptions{}, nil
	}
	pem, err := os.ReadFile(c.tlsCA)
	if err != nil {
		return peer.DialOptions{}, fmt.Errorf("--tls-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return peer.DialOptions{}, fmt.Errorf("--tls-ca: no certificates in %s", c.tlsCA)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return peer.DialOptions{HTTPClient: &http.Client{Transport: tr}}, nil
}

// expect says what kind of value a flag takes, for messages about a bad
// one: the flag package itself says only "parse error".
func expect(f *flag.Flag) string {
	def := f.DefValue
	switch {
	case def == "true" || def == "false":
		return "; want true or false"
	case isDuration(def):
		return "; want a duration such as 50ms, 2s or 1m"
	case isNumber(def):
		return "; want a number"
	}
	return ""
}

func isDuration(s string) bool {
	_, err := time.ParseDuration(s)
	return err == nil && strings.ContainsAny(s, "smhµn")
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// hmacSecret decodes an HS256 secret given in hex or base64 to the bytes
// that sign and check tokens: the node's --auth-key and the token
// command's --key decode alike.
func hmacSecret(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		if b, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, errors.New("neither hex nor base64")
		}
	}
	return b, nil
}
