package client

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/scope"
)

// ErrTransferRefused is returned by TakeOwnership and Release when the
// server decided otherwise (relay.ErrTransferRefused).
var ErrTransferRefused = relay.ErrTransferRefused

// Options configures a Client. The zero value is usable.
type Options struct {
	// Identifier is the client's world identifier. Keep it across restarts
	// to keep ownership of objects; empty means a fresh one with Prefix
	// ("client" if empty).
	Identifier, Prefix string
	// Tick is how often the client sends what it changed (as
	// relay.Options). Zero means peer.DefaultTick.
	Tick time.Duration
	// MinBackoff and MaxBackoff bound reconnect delays (see
	// relay.UpstreamOptions).
	MinBackoff, MaxBackoff time.Duration
	// Interest is the region the client wants to see (see SetInterest);
	// nil means everything.
	Interest []peer.Box
	// Rooms are the rooms the client is in from the start (see SetRooms);
	// nil means all.
	Rooms []string
	// Token, if set, is presented to the server (a bearer Authorization
	// header) when authentication is on.
	Token string
	// FailoverURLs are more nodes (members of a mesh) to try, in turn,
	// after an attempt at the previous one fails; the client's URL comes
	// first. Nil means that one only.
	FailoverURLs []string
	// Dial configures the WebSocket handshake.
	Dial peer.DialOptions
	// DigestInterval is how often the client sends the node a digest of
	// its objects there (as relay.Options); zero means the default.
	DigestInterval time.Duration
	// Budget is the bytes per second of changes the client asks the
	// server for at most: beyond it, the nearest objects' changes come
	// first and the others wait (docs/protocol.md, "Priority and
	// budgets"). Zero asks no limit.
	Budget int
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// Event is a change to an object owned by another world, as seen by a
// Client, or a change of any object's owner.
type Event struct {
	// Type is Add when the object appeared, Update when some properties
	// changed, Remove when it went away and Transfer when it changed
	// owner (see Gained and Lost).
	Type gameworld.ChangeType
	ID   string
	// Owner is the identifier of the world that owns the object.
	Owner string
	// PrevOwner is the owner before a Transfer.
	PrevOwner string
	// Gained and Lost are set on a Transfer that made this client the
	// object's owner, or took the object from it.
	Gained, Lost bool
	// Changed holds the properties this event set (nil for Remove).
	Changed gameworld.Properties
	// Properties holds all the object's properties after the event (nil
	// for Remove). Neither map may be modified.
	Properties gameworld.Properties
	// Scopes holds what the event changed of the object's scopes, by
	// name (see Elements); nil if nothing. It may not be modified.
	Scopes map[string]scope.Delta
}

// Client is a Go program's connection to a Solipsism server, directly or
// through any number of proxies. It owns the objects it creates and sees
// everyone else's. It reconnects by itself and resynchronises without
// duplicating or losing objects. Its methods are safe for concurrent use.
type Client struct {
	node   *relay.Node
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	connected bool
	connCh    chan struct{} // closed while connected
	// readyCh is closed once the upstream's metadata arrived on the
	// current link: Send waits for it (the upstream says there whether it
	// takes messages).
	readyCh chan struct{}
}

// New starts a client that connects to url (ws:// or wss://) in the
// background and keeps reconnecting until Close.
func New(url string, opts Options) (*Client, error) {
	if opts.Prefix == "" {
		opts.Prefix = "client"
	}
	node, err := relay.New(relay.Options{Role: ownership.Client, Identifier: opts.Identifier, Prefix: opts.Prefix, Tick: opts.Tick, DigestInterval: opts.DigestInterval, Budget: opts.Budget, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	if opts.Interest != nil {
		node.SetInterest(opts.Interest)
	}
	if opts.Rooms != nil {
		node.SetRooms(opts.Rooms)
	}
	if opts.Token != "" {
		h := http.Header{}
		for k, v := range opts.Dial.Header {
			h[k] = v
		}
		h.Set("Authorization", "Bearer "+opts.Token)
		opts.Dial.Header = h
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{node: node, cancel: cancel, done: make(chan struct{}), connCh: make(chan struct{}), readyCh: make(chan struct{})}
	go func() {
		defer close(c.done)
		node.RunUpstream(ctx, relay.UpstreamOptions{ //nolint:errcheck // returns only when closed
			URL: url, FailoverURLs: opts.FailoverURLs, MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff, Dial: opts.Dial,
			OnConnect:    func() { c.setConnected(true) },
			OnReady:      c.setReady,
			OnDisconnect: func(error) { c.setConnected(false) },
		})
	}()
	return c, nil
}

// Dial starts a client and waits until it is connected or ctx is done.
func Dial(ctx context.Context, url string, opts Options) (*Client, error) {
	c, err := New(url, opts)
	if err != nil {
		return nil, err
	}
	if err := c.WaitConnected(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("client: connecting to %s: %w", url, err)
	}
	return c, nil
}

func (c *Client) setConnected(v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v == c.connected {
		return
	}
	c.connected = v
	if v {
		close(c.connCh)
	} else {
		c.connCh = make(chan struct{})
		select {
		case <-c.readyCh:
			c.readyCh = make(chan struct{})
		default:
		}
	}
}

// setReady notes that the upstream's metadata arrived (called with the
// node's lock held: it takes only the client's).
func (c *Client) setReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.readyCh:
	default:
		close(c.readyCh)
	}
}

// Connected reports whether the client currently has a link to the server.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// WaitConnected blocks until the client is connected or ctx is done.
func (c *Client) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	ch := c.connCh
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Identifier returns the client's world identifier, the owner of the
// objects it creates.
func (c *Client) Identifier() string { return c.node.Identifier() }

// Node returns the client node the Client runs on, for what the Client
// does not wrap: its links and repair counts, its message subscriptions.
// Write through the Client, which checks and reports each change.
func (c *Client) Node() *relay.Node { return c.node }

// SetInterest moves the region the client sees: objects with a position
// outside it (beyond the server's margin) leave the client's world, those
// inside arrive. Nil means everything. The client's own objects stay
// wherever they are.
func (c *Client) SetInterest(boxes []peer.Box) { c.node.SetInterest(boxes) }

// SetRooms sets the rooms the client is in: it then sees only their
// objects and messages, and those of no room, and appears in their
// presence (see Present). Nil means all rooms (and no presence).
func (c *Client) SetRooms(rooms []string) { c.node.SetRooms(rooms) }

// Present returns the worlds in a room, from the presence objects the
// client sees (those of rooms it is in), sorted.
func (c *Client) Present(room string) []string {
	var out []string
	c.node.World().Range(func(o gameworld.Object) bool {
		var who, in string
		if json.Unmarshal(o.Properties.Value(relay.PropPresence), &who) == nil && json.Unmarshal(o.Properties.Value(relay.DefaultRoomProperty), &in) == nil && in == room && who != "" {
			out = append(out, who)
		}
		return true
	})
	sort.Strings(out)
	return out
}

// World returns the client's copy of the shared world.
func (c *Client) World() *gameworld.World { return c.node.World() }

// Create adds an object owned by this client and returns its id.
func (c *Client) Create(props map[string]any) (string, error) {
	id := gameworld.NewObjectID()
	return id, c.CreateWithID(id, props)
}

// CreateWithID adds an object with a chosen id, owned by this client.
func (c *Client) CreateWithID(id string, props map[string]any) error {
	p, err := marshalProps(props)
	if err != nil {
		return err
	}
	return c.apply(gameworld.Change{Type: gameworld.Add, ID: id, Owner: c.node.Identifier(), Properties: p})
}

// Set updates some properties of an object this client owns; the others are
// unchanged.
func (c *Client) Set(id string, props map[string]any) error {
	p, err := marshalProps(props)
	if err != nil {
		return err
	}
	return c.apply(gameworld.Change{Type: gameworld.Update, ID: id, Properties: p})
}

// Remove removes an object this client owns.
func (c *Client) Remove(id string) error {
	return c.apply(gameworld.Change{Type: gameworld.Remove, ID: id})
}

func (c *Client) apply(ch gameworld.Change) error {
	res, err := c.node.Apply([]gameworld.Change{ch})
	if err != nil {
		return err
	}
	if len(res.Refused) > 0 {
		return fmt.Errorf("client: %s %s: %w", ch.Type, ch.ID, res.Refused[0].Err)
	}
	return nil
}

// Subscribe calls fn for every change to objects owned by other worlds, in
// order, from the goroutine that applied them. fn must not block for long
// and must not call the Client's write methods. The returned function
// cancels the subscription.
func (c *Client) Subscribe(fn func(Event)) (cancel func()) {
	self := c.node.Identifier()
	return c.node.World().Subscribe(func(a gameworld.Applied) {
		for _, r := range a.Records {
			if r.Owner == self && r.Type != gameworld.Transfer {
				continue
			}
			fn(Event{Type: r.Type, ID: r.ID, Owner: r.Owner, PrevOwner: r.PrevOwner, Changed: r.Properties, Properties: r.After, Scopes: r.Scopes,
				Gained: r.Type == gameworld.Transfer && r.Owner == self && r.PrevOwner != self,
				Lost:   r.Type == gameworld.Transfer && r.PrevOwner == self && r.Owner != self})
		}
	})
}

// TakeOwnership asks the server for an object another world owns and
// waits for the answer: nil once this client owns it (its writes are then
// accepted everywhere), ErrTransferRefused if the server's transfer policy
// or a concurrent claim decided otherwise. Whether an object may be taken
// is marked by its owner with the property "transferable" (or
// "persistent"); see docs/protocol.md.
func (c *Client) TakeOwnership(ctx context.Context, id string) error {
	return c.transfer(ctx, id, c.node.Identifier())
}

// Release gives an object this client owns to the server node, from which
// anyone may take it (if it may be taken), and waits until it is gone.
func (c *Client) Release(ctx context.Context, id string) error {
	return c.transfer(ctx, id, "")
}

// transfer sends a request and waits for the answer to it.
func (c *Client) transfer(ctx context.Context, id, owner string) error {
	a, err := c.node.RequestTransfer(ctx, id, owner)
	switch {
	case err != nil:
		return err
	case a.Gone && owner != "":
		return fmt.Errorf("%w: %s is gone", ErrTransferRefused, id)
	case a.Gone:
		return nil // released, and gone since
	case (owner != "") != (a.Owner == c.node.Identifier()):
		return fmt.Errorf("%w: %s is owned by %s", ErrTransferRefused, id, a.Owner)
	}
	return nil
}

// Send sends an ephemeral message from this client: to everyone, or to
// m.Room or m.World if set (see peer.AppMessage; m.From is this client,
// whatever it says). It is not stored: a message sent while the client is
// not connected is lost, and so is one for a world not connected.
func (c *Client) Send(m peer.AppMessage) error {
	// Just connected, the upstream may not have said yet that it takes
	// messages: wait a little for it rather than lose the message.
	c.mu.Lock()
	ready := c.readyCh
	c.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(2 * time.Second):
	}
	return c.node.Publish(m)
}

// SubscribeMessages calls fn for every message that reaches this client,
// in order, as relay.Node.SubscribeMessages does: fn must not block for long and
// must not call the Client. The returned function cancels the
// subscription.
func (c *Client) SubscribeMessages(fn func(peer.AppMessage)) (cancel func()) {
	return c.node.SubscribeMessages(fn)
}

// Owner returns the owner of an object in the client's copy of the world.
func (c *Client) Owner(id string) (string, bool) {
	o, ok := c.node.World().Get(id)
	return o.Owner, ok
}

// Close sends what is still queued (for up to 2 s), then disconnects and
// stops reconnecting.
func (c *Client) Close() error {
	// What the client changed in its last tick goes out first: a
	// persistent object's last move, a release, must not be lost.
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
	c.node.Flush(dctx)
	dcancel()
	c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.node.Close(ctx)
	<-c.done
	return err
}

func marshalProps(props map[string]any) (gameworld.Properties, error) {
	var p gameworld.PropertiesBuilder
	for k, v := range props {
		b, err := json.Marshal(v)
		if err != nil {
			return gameworld.Properties{}, fmt.Errorf("client: property %q: %w", k, err)
		}
		p.Add(k, b)
	}
	return p.Build(), nil
}
