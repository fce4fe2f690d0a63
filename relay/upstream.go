package relay

import (
	"context"
	"time"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// UpstreamOptions configures RunUpstream. The zero value of every field but
// URL means its default.
type UpstreamOptions struct {
	// URL of the upstream server or proxy, ws:// or wss://.
	URL string
	// FailoverURLs are more upstreams (members of a mesh) tried in turn
	// after an attempt or a link fails, URL first. Nil means URL only.
	FailoverURLs []string
	// MinBackoff is the first reconnect delay; it doubles per failed attempt
	// up to MaxBackoff, with jitter. Zero means 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds one connection attempt. Zero means 10 s.
	DialTimeout time.Duration
	// StableAfter is how long a connection must last to count as a
	// success: one that dies sooner (say, refused by the upstream after the
	// handshake, every time) keeps backing off instead of reconnecting at
	// once. Zero means 10 s.
	StableAfter time.Duration
	// Dial configures the WebSocket handshake (TLS, headers, read limit).
	Dial peer.DialOptions
	// OnConnect and OnDisconnect, if set, are called when the upstream link
	// opens and closes. They run on RunUpstream's goroutine.
	OnConnect    func()
	OnDisconnect func(err error)
	// OnReady, if set, is called when the upstream's metadata has arrived
	// on a link just opened: from then on the upstream is told what this
	// node sends it, messages included. It is called with the node's lock
	// held and must not call the node.
	OnReady func()
}

// RunUpstream keeps a link to the upstream open until ctx is done or the node
// closes, reconnecting with exponential backoff and jitter. Each connection
// resynchronises: this node's objects (and its clients') are offered again, a
// refresh is requested, and objects that vanished upstream meanwhile are
// removed here. It returns ctx's error or ErrClosed.
func (n *Node) RunUpstream(ctx context.Context, opts UpstreamOptions) error {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.StableAfter <= 0 {
		opts.StableAfter = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(n.life.ctx, cancel)
	defer stop()

	n.up.status.mu.Lock()
	n.up.status.wanted = true
	n.up.status.mu.Unlock()
	n.lock()
	n.up.onReady = opts.OnReady
	n.mu.Unlock()
	base := append([]string{opts.URL}, opts.FailoverURLs...)
	urls := base
	// A draining upstream's TypeMoved names where to go: the link closes,
	// and those are dialled first, at once.
	cancelMoved := n.SubscribeMessages(n.watchMoved)
	defer cancelMoved()
	failures := 0
	for attempt := 0; ; attempt++ {
		opts.URL = urls[attempt%len(urls)]
		dctx, dcancel := context.WithTimeout(ctx, opts.DialTimeout)
		conn, err := peer.Dial(dctx, opts.URL, opts.Dial)
		dcancel()
		if err == nil {
			if opts.OnConnect != nil {
				opts.OnConnect()
			}
			n.log.Info("upstream connected", "url", opts.URL)
			n.upstreamConnected(opts.URL)
			start := time.Now()
			err = n.serveUpstream(ctx, conn, opts.URL)
			if time.Since(start) >= opts.StableAfter {
				failures = 0
			}
			n.log.Info("upstream disconnected", "url", opts.URL, "err", err, "lasted", time.Since(start).Round(time.Millisecond))
			if opts.OnDisconnect != nil {
				opts.OnDisconnect(err)
			}
			if ctx.Err() == nil {
				n.upstreamFailed(opts.URL, err)
			}
		} else {
			n.log.Debug("upstream dial failed", "url", opts.URL, "err", err)
			if ctx.Err() == nil {
				n.upstreamFailed(opts.URL, err)
			}
		}
		if ctx.Err() != nil {
			if n.life.ctx.Err() != nil {
				return ErrClosed
			}
			return ctx.Err()
		}
		if moved := n.takeMoved(); len(moved) > 0 {
			urls = mergeURLs(moved, base)
			attempt, failures = -1, 0
			continue
		}
		d := peer.Backoff(failures, opts.MinBackoff, opts.MaxBackoff)
		failures++
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			if n.life.ctx.Err() != nil {
				return ErrClosed
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// serveUpstream serves an upstream link until it closes or ctx is done.
func (n *Node) serveUpstream(ctx context.Context, conn peer.Conn, url string) error {
	stop := context.AfterFunc(ctx, func() { conn.Close(peer.StatusGoingAway, "node shutting down") })
	defer stop()
	return n.run(n.attach(conn, ownership.Upstream, url, ""))
}

// upstreamLink is what the node asks of its upstream and was given by it
// (upstream.go, ready.go).
type upstreamLink struct {
	// status is what RunUpstream knows of the upstream, under a mutex of
	// its own.
	status upstreamState
	// onReady is UpstreamOptions.OnReady.
	onReady func()
	// rooms are the rooms a client node is in (SetRooms), interest what
	// it wants to see (SetInterest); nil means all.
	rooms    []string
	interest []peer.Box
	// tokens are the resume tokens the upstream handed us.
	tokens map[string]string
	// moved are the URLs a draining upstream sent us to (drain.go),
	// until RunUpstream takes them.
	moved []string
}
