package wiretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Object is an object as a Peer sees it.
type Object struct {
	Owner      string
	Properties map[string]json.RawMessage
}

// Options configures a Peer. The zero value answers like the shipped 2016
// library: metadataChange, with an identifierChain of just the identifier.
type Options struct {
	// Chain is the identifierChain; nil means [identifier].
	Chain []string
	// DocDialect answers requestMetadata with "metadata" instead of
	// "metadataChange".
	DocDialect bool
	// Silent peers answer nothing (no metadata, no refresh).
	Silent bool
	// ReadLimit for messages from the node; zero means 64 MiB.
	ReadLimit int64
	// MetadataDelay delays the answer to requestMetadata, as a slow peer
	// (or a worker relaying for a page) would; other messages are handled
	// meanwhile.
	MetadataDelay time.Duration
	// Owned are add records of objects the peer owns from the start; it
	// offers them only in refresh answers.
	Owned []map[string]any
	// ReadDelay is a pause after each message read: a slow link.
	ReadDelay time.Duration
	// Forget keeps only the first 16 messages for Messages (a long-lived
	// peer's view stays; the log of what built it does not).
	Forget bool
	// Features are listed in the peer's metadata; a peer that lists
	// "messages" takes ephemeral messages (any other is a violation).
	Features []string
	// Extra holds more metadata keys (say "rooms").
	Extra map[string]any
	// Eager sends metadataChange as soon as the connection is up, before
	// the node asks (and again when it asks), as a 2016 client that
	// announces itself does; its first changes may follow at once.
	Eager bool
}

// Peer is a raw protocol peer over a real WebSocket connection.
type Peer struct {
	t    testing.TB
	ID   string
	opts Options
	conn *websocket.Conn
	ctx  context.Context

	mu         sync.Mutex
	cond       *sync.Cond
	objects    map[string]*Object
	owned      map[string]Object
	messages   []Message
	counts     map[string]int // messages received, by type
	removes    map[string]int // removes applied, by object id
	violations []string
	closed     error
	wmu        sync.Mutex
	// mdSent: the metadata answer has been sent; earlyRefresh: a
	// requestRefresh arrived before it.
	mdSent, earlyRefresh bool
}

// Message is one received message.
type Message struct {
	Type string
	Data json.RawMessage
	At   time.Time
}

// Dial connects a peer with the given world identifier to a ws:// URL.
func Dial(t testing.TB, url, id string, opts Options) *Peer {
	t.Helper()
	p, err := TryDial(t, url, id, opts)
	if err != nil {
		t.Fatalf("wiretest: dial %s: %v", url, err)
	}
	return p
}

// TryDial is Dial that returns the error.
func TryDial(t testing.TB, url, id string, opts Options) (*Peer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	c, _, err := websocket.Dial(dctx, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if opts.ReadLimit == 0 {
		opts.ReadLimit = 64 << 20
	}
	c.SetReadLimit(opts.ReadLimit)
	if opts.Chain == nil {
		opts.Chain = []string{id}
	}
	p := &Peer{t: t, ID: id, opts: opts, conn: c, ctx: ctx, objects: map[string]*Object{}, owned: map[string]Object{}}
	p.cond = sync.NewCond(&p.mu)
	p.own(opts.Owned)
	if opts.Eager {
		p.mdSent = true
		if err := p.Send("metadataChange", p.metadata()); err != nil {
			c.CloseNow()
			cancel()
			return nil, err
		}
	}
	go p.readLoop()
	t.Cleanup(func() {
		p.conn.Close(websocket.StatusNormalClosure, "test done")
		cancel()
	})
	return p, nil
}

// WSURL turns an httptest server into its /ws URL.
func WSURL(s *httptest.Server) string { return "ws" + strings.TrimPrefix(s.URL, "http") + "/ws" }

func (p *Peer) readLoop() {
	for {
		typ, b, err := p.conn.Read(p.ctx)
		if err != nil {
			p.mu.Lock()
			p.closed = err
			p.cond.Broadcast()
			p.mu.Unlock()
			return
		}
		if typ != websocket.MessageText {
			p.violate("binary message")
			continue
		}
		var env []json.RawMessage
		if err := json.Unmarshal(b, &env); err != nil || len(env) < 1 || len(env) > 2 {
			p.violate("malformed envelope: " + string(b))
			continue
		}
		var m Message
		json.Unmarshal(env[0], &m.Type)
		if len(env) == 2 {
			m.Data = env[1]
		}
		m.At = time.Now()
		p.handle(m)
		if p.opts.ReadDelay > 0 {
			time.Sleep(p.opts.ReadDelay)
		}
	}
}

func (p *Peer) violate(s string) {
	p.mu.Lock()
	p.violations = append(p.violations, s)
	p.mu.Unlock()
}

type wireChange struct {
	Type       string                     `json:"type"`
	ID         string                     `json:"id"`
	Owner      string                     `json:"owner"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func (p *Peer) handle(m Message) {
	// Replies are sent after unlocking, in order, from the read goroutine,
	// as the JavaScript library does.
	var replies [][2]any
	defer func() {
		for _, r := range replies {
			p.Send(r[0].(string), r[1])
		}
	}()
	p.mu.Lock()
	if p.counts == nil {
		p.counts = map[string]int{}
	}
	p.counts[m.Type]++
	if !p.opts.Forget || len(p.messages) < 16 {
		p.messages = append(p.messages, m)
	}
	switch m.Type {
	case "worldChange":
		var wc struct {
			Timestamp *float64     `json:"timestamp"`
			Changes   []wireChange `json:"changes"`
		}
		if err := json.Unmarshal(m.Data, &wc); err != nil {
			p.violations = append(p.violations, "bad worldChange: "+err.Error())
			break
		}
		if wc.Timestamp == nil || *wc.Timestamp < 1e12 {
			p.violations = append(p.violations, "timestamp missing or not in milliseconds")
		}
		seen := map[string]string{}
		for _, c := range wc.Changes {
			if prev, ok := seen[c.ID]; ok {
				p.violations = append(p.violations, fmt.Sprintf("%s and %s of %s in one message", prev, c.Type, c.ID))
			}
			seen[c.ID] = c.Type
			if c.Owner == "" {
				p.violations = append(p.violations, c.Type+" without owner")
			}
			if _, mine := p.owned[c.ID]; mine && c.Type == "remove" && p.objects[c.ID] == nil {
				// The library holds its own objects in the same world: a
				// remove of one (it was taken, or its creation lost to
				// another's) is of an id it knows, and drops it.
				delete(p.owned, c.ID)
				continue
			}
			if _, mine := p.owned[c.ID]; mine && c.Type != "remove" && slices.Contains(p.opts.Chain, c.Owner) {
				// The library would take it as the truth about its own
				// object, and go back to an older value.
				p.violations = append(p.violations, c.Type+" of the peer's own object "+c.ID)
				continue
			}
			if problem := applyLikeJS(p.objects, c); problem != "" {
				p.violations = append(p.violations, problem)
			} else if c.Type == "remove" {
				if p.removes == nil {
					p.removes = map[string]int{}
				}
				p.removes[c.ID]++
			}
		}
	case "requestMetadata":
		if !p.opts.Silent {
			name := "metadataChange"
			if p.opts.DocDialect {
				name = "metadata"
			}
			md := p.metadata()
			if p.opts.MetadataDelay > 0 {
				time.AfterFunc(p.opts.MetadataDelay, func() {
					p.mu.Lock()
					p.mdSent = true
					p.mu.Unlock()
					p.Send(name, md)
				})
			} else {
				p.mdSent = true
				replies = append(replies, [2]any{name, md})
			}
		}
	case "requestRefresh":
		if !p.mdSent {
			p.earlyRefresh = true
		}
		if !p.opts.Silent {
			changes := []map[string]any{}
			for id, o := range p.owned {
				// A copy: the reply is encoded after unlocking, while the
				// test may change the peer's objects.
				changes = append(changes, map[string]any{"type": "add", "id": id, "owner": o.Owner, "properties": maps.Clone(o.Properties)})
			}
			replies = append(replies, [2]any{"worldChange", map[string]any{"timestamp": time.Now().UnixMilli(), "changes": changes}})
		}
	case "metadata", "metadataChange":
	case "message":
		if !slices.Contains(p.opts.Features, "messages") {
			p.violations = append(p.violations, "a message to a peer that does not take them")
		}
	default:
		p.violations = append(p.violations, "unknown message type "+m.Type)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// metadata is the peer's metadata answer.
func (p *Peer) metadata() map[string]any {
	md := map[string]any{"identifier": p.ID, "identifierChain": p.opts.Chain}
	if p.opts.Features != nil {
		md["features"] = p.opts.Features
	}
	for k, v := range p.opts.Extra {
		md[k] = v
	}
	return md
}

// Send sends [typ, data].
func (p *Peer) Send(typ string, data any) error {
	b, err := json.Marshal([]any{typ, data})
	if err != nil {
		return err
	}
	return p.SendRaw(b)
}

// SendRaw sends a text message as is.
func (p *Peer) SendRaw(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, writeTimeout(len(b)))
	defer cancel()
	return p.conn.Write(ctx, websocket.MessageText, b)
}

// SendBinary sends a binary message.
func (p *Peer) SendBinary(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, writeTimeout(len(b)))
	defer cancel()
	return p.conn.Write(ctx, websocket.MessageBinary, b)
}

// writeTimeout bounds the write of an n-byte message: 5 s, and a second
// more per 256 KiB, as a node on busy cores may read an 11 MB world at
// well under 1 MB/s. (A write cut short by its deadline leaves a frame
// half sent, which the node reads as a corrupt message.)
func writeTimeout(n int) time.Duration {
	return 5*time.Second + time.Duration(n/(256<<10))*time.Second
}

// own records changes to the peer's own objects, for refresh answers.
func (p *Peer) own(changes []map[string]any) {
	p.mu.Lock()
	for _, c := range changes {
		id, _ := c["id"].(string)
		owner, _ := c["owner"].(string)
		props, _ := c["properties"].(map[string]any)
		raw := map[string]json.RawMessage{}
		for k, v := range props {
			b, _ := json.Marshal(v)
			raw[k] = b
		}
		switch c["type"] {
		case "add":
			if o, ok := p.owned[id]; ok {
				for k, v := range raw {
					o.Properties[k] = v
				}
			} else if owner != "" {
				p.owned[id] = Object{Owner: owner, Properties: raw}
			}
		case "update":
			if o, ok := p.owned[id]; ok {
				for k, v := range raw {
					o.Properties[k] = v
				}
			}
		case "remove":
			delete(p.owned, id)
		}
	}
	p.mu.Unlock()
}

// Change sends one worldChange with the given records and remembers the
// peer's own objects so it can answer requestRefresh.
func (p *Peer) Change(changes ...map[string]any) {
	p.t.Helper()
	if err := p.TryChange(changes...); err != nil {
		p.t.Fatalf("wiretest: %s: send: %v", p.ID, err)
	}
}

// TryChange is Change that returns the error of a send (on a connection
// that closed, say), for tests where connections may break.
func (p *Peer) TryChange(changes ...map[string]any) error {
	p.own(changes)
	return p.Send("worldChange", map[string]any{"timestamp": time.Now().UnixMilli(), "changes": changes})
}

// Add returns an add record owned by owner.
func Add(id, owner string, props map[string]any) map[string]any {
	return map[string]any{"type": "add", "id": id, "owner": owner, "properties": props}
}

// Update returns an update record.
func Update(id, owner string, props map[string]any) map[string]any {
	return map[string]any{"type": "update", "id": id, "owner": owner, "properties": props}
}

// Remove returns a remove record.
func Remove(id, owner string) map[string]any {
	return map[string]any{"type": "remove", "id": id, "owner": owner}
}

// Wait waits until cond, called with the peer's view of the world, holds.
func (p *Peer) Wait(what string, timeout time.Duration, cond func(objects map[string]Object) bool) {
	p.t.Helper()
	if err := p.WaitErr(timeout, cond); err != nil {
		p.mu.Lock()
		view := fmt.Sprint(p.objects)
		p.mu.Unlock()
		p.t.Fatalf("wiretest: %s: waiting for %s: %v; view: %s", p.ID, what, err, view)
	}
}

// WaitErr is Wait returning an error instead of failing.
func (p *Peer) WaitErr(timeout time.Duration, cond func(objects map[string]Object) bool) error {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for !cond(p.viewLocked()) {
		if p.closed != nil {
			return fmt.Errorf("connection closed: %w", p.closed)
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		p.cond.Wait()
	}
	return nil
}

// WaitProp waits until object id has property key with the JSON value want.
func (p *Peer) WaitProp(id, key, want string) {
	p.t.Helper()
	p.Wait(fmt.Sprintf("%s.%s=%s", id, key, want), 5*time.Second, func(m map[string]Object) bool {
		o, ok := m[id]
		return ok && string(o.Properties[key]) == want
	})
}

// WaitGone waits until object id is absent.
func (p *Peer) WaitGone(id string) {
	p.t.Helper()
	p.Wait(id+" gone", 5*time.Second, func(m map[string]Object) bool { _, ok := m[id]; return !ok })
}

// WaitClosed waits for the connection to close and returns its close status.
func (p *Peer) WaitClosed(timeout time.Duration) (websocket.StatusCode, string) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.closed == nil {
		if time.Now().After(deadline) {
			p.t.Fatalf("wiretest: %s: connection not closed within %s", p.ID, timeout)
		}
		p.cond.Wait()
	}
	var ce websocket.CloseError
	if errors.As(p.closed, &ce) {
		return ce.Code, ce.Reason
	}
	return -1, p.closed.Error()
}

// Len returns the number of objects in the peer's view, without copying it.
func (p *Peer) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.objects)
}

// Objects returns a copy of the peer's view.
func (p *Peer) Objects() map[string]Object {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.viewLocked()
}

func (p *Peer) viewLocked() map[string]Object { return copyObjects(p.objects) }

// copyObjects returns a deep copy of a view.
func copyObjects(in map[string]*Object) map[string]Object {
	out := make(map[string]Object, len(in))
	for k, v := range in {
		props := make(map[string]json.RawMessage, len(v.Properties))
		for pk, pv := range v.Properties {
			props[pk] = pv
		}
		out[k] = Object{Owner: v.Owner, Properties: props}
	}
	return out
}

// applyLikeJS applies one change record to a view the way the 2016 library
// does, and describes what would have crashed it ("" if nothing).
func applyLikeJS(objs map[string]*Object, c wireChange) string {
	switch c.Type {
	case "add":
		o, ok := objs[c.ID]
		if !ok {
			o = &Object{Owner: c.Owner, Properties: map[string]json.RawMessage{}}
			objs[c.ID] = o
		}
		for k, v := range c.Properties {
			o.Properties[k] = v
		}
	case "update":
		if o, ok := objs[c.ID]; ok {
			for k, v := range c.Properties {
				o.Properties[k] = v
			}
		}
	case "remove":
		if _, ok := objs[c.ID]; !ok {
			return "remove of unknown id " + c.ID
		}
		delete(objs, c.ID)
	default:
		return "unknown change type " + c.Type
	}
	return ""
}

// Removes returns how many times each object was removed from the peer's
// view (a remove it was sent of an object it held).
func (p *Peer) Removes() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.removes)
}

// Owned returns add records of the objects the peer owns now, for a peer
// that connects again in its name (Options.Owned).
func (p *Peer) Owned() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]map[string]any, 0, len(p.owned))
	for id, o := range p.owned {
		props := map[string]any{}
		for k, v := range o.Properties {
			props[k] = v
		}
		out = append(out, map[string]any{"type": "add", "id": id, "owner": o.Owner, "properties": props})
	}
	return out
}

// Messages returns the messages received so far.
func (p *Peer) Messages() []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Message(nil), p.messages...)
}

// Violations returns what would have crashed the 2016 library.
func (p *Peer) Violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.violations...)
}

// CheckClean fails the test if the peer received anything that would have
// crashed the 2016 library.
func (p *Peer) CheckClean() {
	p.t.Helper()
	if v := p.Violations(); len(v) > 0 {
		p.t.Errorf("wiretest: %s received what crashes a 2016 peer: %v", p.ID, v)
	}
}

// RefreshBeforeMetadata reports whether a requestRefresh arrived before the
// peer had answered requestMetadata.
func (p *Peer) RefreshBeforeMetadata() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.earlyRefresh
}

// Close closes the connection normally.
func (p *Peer) Close() { p.conn.Close(websocket.StatusNormalClosure, "bye") }

// Closed returns why the connection ended, or nil while it is up.
func (p *Peer) Closed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Drop closes the TCP connection without a close handshake.
func (p *Peer) Drop() { p.conn.CloseNow() }

// WaitHas waits until object id is present.
func (p *Peer) WaitHas(id string) {
	p.t.Helper()
	p.Wait(id+" present", 5*time.Second, func(m map[string]Object) bool { _, ok := m[id]; return ok })
}

// AppMessages returns the data of the ephemeral messages received so far,
// in order.
func (p *Peer) AppMessages() []json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []json.RawMessage
	for _, m := range p.messages {
		if m.Type == "message" {
			out = append(out, m.Data)
		}
	}
	return out
}

// MessageCount returns how many messages of a type the peer received, all
// of them counted even with Forget.
func (p *Peer) MessageCount(typ string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[typ]
}
