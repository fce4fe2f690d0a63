package alloverse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ClientOptions configures a Client. The zero value is usable.
type ClientOptions struct {
	// History is how many received states the client keeps to apply diffs
	// to. Zero means DefaultHistory.
	History int
	// DropState and DropAck, if set, are asked before each state packet is
	// taken and each acknowledgement is sent; true drops it, as a lossy
	// channel would. For tests of loss.
	DropState, DropAck func() bool
	// ReadLimit is the largest packet taken. Zero means 64 MiB.
	ReadLimit int64
	// Token is presented to a place that wants one: on the WebSocket
	// handshake, and in the announce's identity.
	Token string
	// Version is the protocol version announced, as allonet announces its
	// major version; over ENet, 3 also means allonet 3's channel layout
	// (LayoutV3). Zero means 4.
	Version int
}

// Client is an Alloverse client over WebSocket: it follows the place's
// world document and makes place requests. Its methods are safe for
// concurrent use.
type Client struct {
	t    clientTransport
	opts ClientOptions
	done chan struct{}

	mu      sync.Mutex
	hist    map[uint64][]byte
	order   []uint64 // revisions in hist, oldest first
	latest  uint64
	have    bool
	stats   ClientStats
	changed chan struct{}
	reqID   uint64
	pending map[string]chan []json.RawMessage
	err     error
	// next is the newest state packet read and not yet taken: a client
	// that falls behind (a world of 100,000 entities on a busy machine)
	// takes only the newest, which is safe since the place diffs against
	// what was acknowledged, and sees its connection end at once.
	next []byte
}

// ClientStats counts what a Client received.
type ClientStats struct {
	// Sets, Merges and Applies count the packets of each form taken.
	Sets, Merges, Applies uint64
	// Failed counts packets that could not be used (a missing base, a
	// patch that failed): each asks for a set.
	Failed uint64
	// Skipped counts state packets passed over, unacknowledged, because
	// a newer one arrived before the client could take them.
	Skipped uint64
	// Stale counts packets not newer than the newest state (each is
	// answered with an acknowledgement of the newest).
	Stale uint64
	// Last is the form of the last packet taken: "set", "merge" or
	// "apply"; LastBytes its size.
	Last      string
	LastBytes int
}

// DialClient connects to an Alloverse endpoint (ws:// or wss:// URL).
func DialClient(ctx context.Context, url string, opts ClientOptions) (*Client, error) {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = 64 << 20
	}
	var dopts *websocket.DialOptions
	if opts.Token != "" {
		dopts = &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + opts.Token}}}
	}
	c, _, err := websocket.Dial(ctx, url, dopts)
	if err != nil {
		return nil, fmt.Errorf("alloverse: dial %s: %w", url, err)
	}
	c.SetReadLimit(opts.ReadLimit)
	return newClient(wsTransport{c}, opts), nil
}

func newClient(t clientTransport, opts ClientOptions) *Client {
	cl := &Client{t: t, opts: opts, done: make(chan struct{}), hist: map[uint64][]byte{},
		changed: make(chan struct{}), pending: map[string]chan []json.RawMessage{}}
	go cl.readLoop()
	return cl
}

// clientTransport carries a Client's frames: state packets and replies
// in, intents and requests out.
type clientTransport interface {
	read(ctx context.Context) (state bool, frame []byte, err error)
	writeIntent(ctx context.Context, b []byte) error
	writeRequest(ctx context.Context, b []byte) error
	close() error
}

type wsTransport struct{ c *websocket.Conn }

func (w wsTransport) read(ctx context.Context) (bool, []byte, error) {
	_, b, err := w.c.Read(ctx)
	return len(b) == 0 || b[0] != '[', b, err
}
func (w wsTransport) writeIntent(ctx context.Context, b []byte) error {
	return w.c.Write(ctx, websocket.MessageText, b)
}
func (w wsTransport) writeRequest(ctx context.Context, b []byte) error {
	return w.c.Write(ctx, websocket.MessageText, b)
}
func (w wsTransport) close() error { return w.c.Close(websocket.StatusNormalClosure, "") }

// Close disconnects the client.
func (c *Client) Close() error {
	err := c.t.close()
	<-c.done
	return err
}

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Document returns the newest state received, without patch_style, and
// its revision; ok is false before the first.
func (c *Client) Document() (doc []byte, rev uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hist[c.latest], c.latest, c.have
}

// Stats returns what the client has received so far.
func (c *Client) Stats() ClientStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Changed returns a channel closed at the next new state.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Client) readLoop() {
	wake, stop := make(chan struct{}, 1), make(chan struct{})
	go c.takeLoop(wake, stop)
	defer func() {
		close(stop)
		close(c.done)
	}()
	for {
		isState, frame, err := c.t.read(context.Background())
		if err != nil {
			c.mu.Lock()
			c.err = err
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		if !isState {
			c.reply(frame)
			continue
		}
		if c.opts.DropState != nil && c.opts.DropState() {
			continue
		}
		c.mu.Lock()
		if c.next != nil {
			c.stats.Skipped++
		}
		c.next = frame
		c.mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// takeLoop takes the newest state packet each time one is read, until
// the connection ends.
func (c *Client) takeLoop(wake, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-wake:
		}
		c.mu.Lock()
		frame := c.next
		c.next = nil
		c.mu.Unlock()
		if frame == nil {
			continue
		}
		if rev, ok := c.state(frame); ok {
			c.ack(rev)
		}
	}
}

// reply hands an interaction response to the request waiting for it.
func (c *Client) reply(frame []byte) {
	var parts []json.RawMessage
	if json.Unmarshal(frame, &parts) != nil || len(parts) != 6 {
		return
	}
	var kind, typ, id string
	json.Unmarshal(parts[0], &kind)
	json.Unmarshal(parts[1], &typ)
	json.Unmarshal(parts[4], &id)
	var body []json.RawMessage
	if kind != "interaction" || typ != "response" || json.Unmarshal(parts[5], &body) != nil {
		return
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- body
	}
}

// state takes one state packet: a set, merge or apply. It returns the
// acknowledgement to send, if any.
func (c *Client) state(pkt []byte) (ack uint64, send bool) {
	doc, style, err := c.resolve(pkt)
	c.mu.Lock()
	if err != nil {
		c.stats.Failed++
		c.mu.Unlock()
		return 0, true // ask for a set
	}
	var top struct {
		Revision json.RawMessage `json:"revision"`
	}
	rev, ok := uint64(0), false
	if json.Unmarshal(doc, &top) == nil {
		rev, ok = parseRevision(top.Revision)
	}
	switch {
	case !ok:
		c.stats.Failed++
		c.mu.Unlock()
		return 0, true
	case c.have && !isNewer(rev, c.latest) && (style != "set" || rev != c.latest):
		// Not newer than what we hold, yet the server sent it: it has not
		// heard our acknowledgement (lost, or not yet there). Say it again.
		// (A set of the revision we hold is taken, and acknowledged: the
		// answer to an acknowledgement of 0.)
		c.stats.Stale++
		latest := c.latest
		c.mu.Unlock()
		return latest, latest != 0
	}
	if _, dup := c.hist[rev]; !dup {
		c.order = append(c.order, rev)
	}
	c.hist[rev] = doc
	for len(c.order) > c.opts.History {
		delete(c.hist, c.order[0])
		c.order = c.order[1:]
	}
	c.latest, c.have = rev, true
	c.stats.Last, c.stats.LastBytes = style, len(pkt)
	switch style {
	case "set":
		c.stats.Sets++
	case "merge":
		c.stats.Merges++
	case "apply":
		c.stats.Applies++
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	// Acknowledging revision 0, after the wrap, would ask for a set: the
	// previous acknowledgement stands until revision 1.
	return rev, rev != 0
}

// resolve turns a packet into the document it describes, and returns
// the packet's form.
func (c *Client) resolve(pkt []byte) (doc []byte, style string, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(pkt, &m); err != nil {
		return nil, "", fmt.Errorf("alloverse: packet is not a JSON object: %w", err)
	}
	json.Unmarshal(m["patch_style"], &style)
	delete(m, "patch_style")
	if style == "set" {
		delete(m, "patch_from")
		doc, err = json.Marshal(m)
		return doc, style, err
	}
	from, ok := parseRevision(m["patch_from"])
	delete(m, "patch_from")
	if !ok {
		return nil, style, errors.New("alloverse: patch without a valid patch_from")
	}
	c.mu.Lock()
	base, ok := c.hist[from]
	c.mu.Unlock()
	if !ok {
		return nil, style, fmt.Errorf("alloverse: base revision %d not in history", from)
	}
	switch style {
	case "merge":
		patch, _ := json.Marshal(m)
		doc, err = MergePatch(base, patch)
	case "apply":
		doc, err = ApplyPatch(base, m["patches"])
	default:
		err = fmt.Errorf("alloverse: unknown patch_style %q", style)
	}
	return doc, style, err
}

// ack acknowledges rev (0 asks for a set).
func (c *Client) ack(rev uint64) {
	if c.opts.DropAck != nil && c.opts.DropAck() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.t.writeIntent(ctx, encodeIntent(rev)) //nolint:errcheck // a lost ack is resent with the next state
}

// Request sends a place request and returns the response body.
func (c *Client) Request(ctx context.Context, body ...any) ([]json.RawMessage, error) {
	c.mu.Lock()
	c.reqID++
	id := strconv.FormatUint(c.reqID, 10)
	ch := make(chan []json.RawMessage, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	frame, err := encodeInteraction("request", "", "place", id, body)
	if err == nil {
		err = c.t.writeRequest(ctx, frame)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, fmt.Errorf("alloverse: request: %w", err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, errors.New("alloverse: connection closed before the response")
		}
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Announce joins the place with an avatar of the given components and
// returns the avatar's entity id and the agent's world identity.
func (c *Client) Announce(ctx context.Context, avatar map[string]any) (avatarID, agent string, err error) {
	identity := map[string]any{"display_name": "go"}
	if c.opts.Token != "" {
		identity["token"] = c.opts.Token
	}
	version := c.opts.Version
	if version == 0 {
		version = 4
	}
	r, err := c.Request(ctx, "announce", "version", version, "identity", identity, "spawn_avatar", avatar)
	if err != nil {
		return "", "", err
	}
	if err := responseError(r); err != nil {
		return "", "", err
	}
	if len(r) < 4 || json.Unmarshal(r[1], &avatarID) != nil || json.Unmarshal(r[3], &agent) != nil {
		return "", "", fmt.Errorf("alloverse: unexpected announce response %s", r)
	}
	return avatarID, agent, nil
}

// responseError returns the error a response body reports, if any:
// [VERB, "error", ...].
func responseError(r []json.RawMessage) error {
	var s string
	if len(r) > 1 && json.Unmarshal(r[1], &s) == nil && s == "error" {
		return fmt.Errorf("alloverse: place refused: %s", r[2:])
	}
	return nil
}
