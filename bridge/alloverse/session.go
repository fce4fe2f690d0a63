package alloverse

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/loop"
	"github.com/solipsism/mesh/relay"
)

// StatusCode is a close code, as WebSocket defines them; other transports
// map them to their own.
type StatusCode int

// Close codes the bridge uses.
const (
	StatusNormal      StatusCode = 1000
	StatusGoingAway   StatusCode = 1001
	StatusUnsupported StatusCode = 1003
	StatusInvalid     StatusCode = 1007
	StatusPolicy      StatusCode = 1008
	StatusTooBig      StatusCode = 1009
	// StatusOutdatedVersion is allonet's alloerror_outdated_version: the
	// client announced a protocol version the place does not speak. It is
	// also the code a place server gives its ENet disconnect.
	StatusOutdatedVersion StatusCode = 1003
)

// Protocol versions served: allonet announces its major version (3, or 4
// since its 4.0 tag), and both generations speak the same interactions
// and state packets; they differ in the ENet channel layout (Layout).
const (
	MinVersion = 3
	MaxVersion = 4
)

// outdatedMessage is what allonet's place server answers an announce of
// another version with.
const outdatedMessage = "Please update your app. Outdated network protocol."

// MergeOnly is implemented by a Conn whose clients read state packets
// only as merge patches or sets (allonet, over ENet): they are never sent
// apply patches, and get a set where merge cannot express a diff.
type MergeOnly interface {
	MergeOnly() bool
}

// Described is implemented by a Conn that can say what kind of client it
// carries (relay.PeerAlloverseWebSocket or relay.PeerAlloverseENet) and
// from where, for the node's state and metrics.
type Described interface {
	Describe() (kind, remote string)
}

// Conn carries one client's frames. SendState and Send must not block:
// state packets are unreliable (a transport may drop one, or replace one
// not yet sent by a newer one), replies are reliable and ordered. Close may
// be called more than once. The bridge calls them from any goroutine, one
// call at a time per method.
type Conn interface {
	SendState(pkt []byte)
	Send(frame []byte) error
	Close(code StatusCode, reason string)
}

// Session is one Alloverse client of a Bridge. Its transport feeds it
// frames (Handle) and closes it when the client leaves (Close).
type Session struct {
	b    *Bridge
	conn Conn
	// peer lists the client in the node's state and metrics.
	peer *relay.BridgedPeer
	// ack is the revision the client acknowledged; sent is the revision
	// of the last state handed to conn, at heartbeat sentAt; wait is how
	// many heartbeats it has to acknowledge it (0: resendBeats). Guarded by
	// b.mu.
	ack, sent, sentAt, wait uint64
	// agent is the client's world identity, once it announced. Set under
	// b.mu by the goroutine calling Handle, which alone reads it unlocked.
	agent     *relay.Attachment
	avatar    string
	closed    bool // guarded by b.mu
	mergeOnly bool
	// grant is what the client's token allows (nil: authentication off,
	// or not yet presented over ENet).
	grant *auth.Grant
	// outdated is set when the client announced a version not served: it
	// is sent the refusal, then disconnected.
	outdated bool
	// view is what the client was sent of its view, once it announced
	// on a bridge with views (viewAgent its identity, viewFrom its
	// avatar); nil: it is sent the whole document. Guarded by b.mu.
	view                *view
	viewAgent, viewFrom string
}

// Connect starts a session for a client on conn. It is sent a full set at
// the next heartbeat.
func (b *Bridge) Connect(conn Conn) (*Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("alloverse: bridge closed")
	}
	if b.node.Draining() {
		return nil, errors.New("alloverse: the node is draining: connect to another")
	}
	s := &Session{b: b, conn: conn}
	if m, ok := conn.(MergeOnly); ok {
		s.mergeOnly = m.MergeOnly()
	}
	kind, remote := relay.PeerAlloverseWebSocket, ""
	if d, ok := conn.(Described); ok {
		kind, remote = d.Describe()
	}
	s.peer = b.node.TrackPeer(kind, remote)
	b.sessions[s] = struct{}{}
	if len(b.sessions) == 1 {
		b.obs.SetInterest(nil, false) // the whole world, now that someone looks
		loop.Wake(b.wake)
	}
	return s, nil
}

// Close ends the session: the client's agent leaves the world, and with
// it every entity it owns.
func (s *Session) Close() {
	s.b.mu.Lock()
	if _, ok := s.b.sessions[s]; ok && len(s.b.sessions) == 1 && !s.b.closed {
		s.b.obs.SetInterest(nil, true)
	}
	delete(s.b.sessions, s)
	s.closed = true
	agent := s.agent
	s.b.mu.Unlock()
	s.peer.Done()
	if agent != nil {
		agent.Detach()
	}
}

// Handle takes one frame from the client. An error means the frame was
// malformed: the transport closes the connection with StatusInvalid. Frames
// of other kinds, and unusable acknowledgements, are ignored.
func (s *Session) Handle(frame []byte) error {
	f, err := DecodeFrame(frame)
	if err != nil {
		return err
	}
	switch {
	case f.Intent && f.AckOK:
		s.b.mu.Lock()
		s.ack = f.Ack
		if f.Ack == s.sent {
			s.wait = 0 // it keeps up again
		}
		s.b.mu.Unlock()
	case f.Interaction != nil && f.Interaction.Type == "request" && f.Interaction.To == "place":
		in := f.Interaction
		body := s.interact(in.Body)
		reply, err := encodeInteraction("response", "place", in.From, in.RequestID, body)
		if err != nil {
			return fmt.Errorf("alloverse: encoding a response: %w", err)
		}
		if err := s.conn.Send(reply); err != nil || !s.outdated {
			return err
		}
		// As allonet's place server does: the refusal, then a disconnect
		// with the same code.
		s.conn.Close(StatusOutdatedVersion, outdatedMessage)
	}
	return nil
}

// interact serves one place request and returns the response body.
func (s *Session) interact(body []json.RawMessage) []any {
	var verb string
	if json.Unmarshal(body[0], &verb) != nil {
		return []any{"error", "the first element of a request body names it"}
	}
	fail := func(format string, args ...any) []any {
		return []any{verb, "error", fmt.Sprintf(format, args...)}
	}
	if verb == "announce" {
		return s.announce(body)
	}
	if s.agent == nil {
		return fail("announce first")
	}
	switch verb {
	case "spawn_entity":
		if len(body) < 2 {
			return fail("spawn_entity takes the entity")
		}
		var spec map[string]json.RawMessage
		if json.Unmarshal(body[1], &spec) != nil {
			return fail("the entity is an object of components")
		}
		changes, id, err := spawnChanges(spec, "", 0)
		if err != nil {
			return fail("%v", err)
		}
		if err := s.apply(changes); err != nil {
			return fail("%v", err)
		}
		return []any{verb, id}
	case "change_components":
		return s.changeComponents(body, fail)
	case "remove_entity":
		return s.removeEntity(body, fail)
	case "take_ownership", "release_ownership":
		// Our extension: ["take_ownership", ID] asks the node for an entity
		// another owns (its transfer policy decides); ["release_ownership",
		// ID] gives one of the agent's to the node.
		var id string
		if len(body) < 2 || json.Unmarshal(body[1], &id) != nil {
			return fail("%s takes an entity id", verb)
		}
		owner := s.agent.Identifier()
		if verb == "release_ownership" {
			owner = ""
		}
		res, err := s.agent.Apply([]gameworld.Change{{Type: gameworld.Transfer, ID: id, Owner: owner}})
		if err != nil {
			return fail("%v", err)
		}
		if len(res.Refused) > 0 {
			return fail("%s %s: %v", verb, id, res.Refused[0].Err)
		}
		return []any{verb, "ok"}
	}
	return fail("unknown request %q", verb)
}

// announce creates the agent's world identity and its avatar:
// ["announce", "version", 3 or 4, "identity", {...}, "spawn_avatar", {...}].
func (s *Session) announce(body []json.RawMessage) []any {
	fail := func(code int, msg string) []any { return []any{"announce", "error", code, msg} }
	if s.agent != nil {
		return fail(409, "already announced")
	}
	args := map[string]json.RawMessage{}
	for i := 1; i+1 < len(body); i += 2 {
		var k string
		if json.Unmarshal(body[i], &k) != nil {
			return fail(400, "announce takes name, value pairs")
		}
		args[k] = body[i+1]
	}
	var version int
	if json.Unmarshal(args["version"], &version) != nil || version < MinVersion || version > MaxVersion {
		s.outdated = true
		return fail(int(StatusOutdatedVersion), outdatedMessage)
	}
	var avatar map[string]json.RawMessage
	if json.Unmarshal(args["spawn_avatar"], &avatar) != nil {
		return fail(400, "spawn_avatar is an object of components")
	}
	changes, id, err := spawnChanges(avatar, "", 0)
	if err != nil {
		return fail(400, err.Error())
	}
	if s.b.opts.Auth != nil && s.grant == nil {
		// Over ENet the token travels in the announce's identity.
		var ident struct {
			Token string `json:"token"`
		}
		json.Unmarshal(args["identity"], &ident)
		g, err := s.b.opts.Auth.Authenticate(ident.Token)
		if err != nil {
			return fail(401, "a valid token is required in identity.token")
		}
		s.grant = g
	}
	prefix, ok := s.grant.Prefix("alloagent")
	if !ok {
		return fail(403, "the token grants no prefix for a new agent identifier")
	}
	agent, err := s.b.node.Attach(relay.AttachOptions{Identifier: gameworld.NewIdentifier(prefix)})
	if err != nil {
		return fail(503, err.Error())
	}
	s.b.mu.Lock()
	closed := s.closed
	if !closed {
		s.agent = agent
	}
	s.b.mu.Unlock()
	s.peer.SetIdentifier(agent.Identifier())
	if closed {
		agent.Detach()
		return fail(410, "session closed")
	}
	if err := s.apply(changes); err != nil {
		// The agent stays, without an avatar; announcing again is refused.
		return fail(400, err.Error())
	}
	s.avatar = id
	if s.b.opts.ViewRadius > 0 {
		s.b.mu.Lock()
		s.view, s.viewAgent, s.viewFrom = &view{}, agent.Identifier(), id
		s.b.mu.Unlock()
	}
	return []any{"announce", id, s.b.opts.PlaceName, agent.Identifier()}
}

// maxChildren bounds how deep and wide one spawn may go.
const (
	maxSpawnDepth    = 16
	maxSpawnEntities = 1024
)

// spawnChanges turns an entity spec ({components..., "children": [...]})
// into adds, children pointing at their parent; it returns the new id.
func spawnChanges(spec map[string]json.RawMessage, parent string, depth int) ([]gameworld.Change, string, error) {
	if depth > maxSpawnDepth {
		return nil, "", errors.New("children nested too deep")
	}
	id := uuid.NewString()
	props := map[string]json.RawMessage{}
	var children []map[string]json.RawMessage
	for k, v := range spec {
		if k == "children" {
			if err := json.Unmarshal(v, &children); err != nil {
				return nil, "", errors.New("children is a list of entities")
			}
			continue
		}
		props[k] = v
	}
	if parent != "" {
		props["relationships"] = mustJSON(map[string]string{"parent": parent})
	}
	changes := []gameworld.Change{{Type: gameworld.Add, ID: id, Properties: gameworld.PropertiesOf(props)}}
	for _, c := range children {
		more, _, err := spawnChanges(c, id, depth+1)
		if err != nil {
			return nil, "", err
		}
		changes = append(changes, more...)
		if len(changes) > maxSpawnEntities {
			return nil, "", errors.New("too many entities in one spawn")
		}
	}
	return changes, id, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// apply applies the agent's changes; all must be accepted.
func (s *Session) apply(changes []gameworld.Change) error {
	res, err := s.agent.Apply(changes)
	if err != nil {
		return err
	}
	if len(res.Refused) > 0 {
		rf := res.Refused[0]
		if errors.Is(rf.Err, gameworld.ErrUnknownObject) {
			return fmt.Errorf("no entity %s", rf.Change.ID)
		}
		if errors.Is(rf.Err, relay.ErrInvalidWrite) {
			return fmt.Errorf("entity %s: %v", rf.Change.ID, rf.Err)
		}
		return fmt.Errorf("entity %s is not yours", rf.Change.ID)
	}
	return nil
}

// changeComponents serves
// ["change_components", ID, "add_or_change", {...}, "remove", [names]].
func (s *Session) changeComponents(body []json.RawMessage, fail func(string, ...any) []any) []any {
	var id string
	if len(body) < 2 || json.Unmarshal(body[1], &id) != nil {
		return fail("change_components takes an entity id")
	}
	props := map[string]json.RawMessage{}
	for i := 2; i+1 < len(body); i += 2 {
		var k string
		json.Unmarshal(body[i], &k)
		switch k {
		case "add_or_change":
			var m map[string]json.RawMessage
			if json.Unmarshal(body[i+1], &m) != nil {
				return fail("add_or_change is an object of components")
			}
			for name, v := range m {
				props[name] = v
			}
		case "remove":
			var names []string
			if json.Unmarshal(body[i+1], &names) != nil {
				return fail("remove is a list of component names")
			}
			for _, name := range names {
				props[name] = json.RawMessage("null")
			}
		default:
			return fail("unknown argument %q", k)
		}
	}
	scopes, err := s.scopeChanges(id, props)
	if err != nil {
		return fail("%v", err)
	}
	if len(props) == 0 && len(scopes) == 0 {
		return []any{"change_components", "ok"}
	}
	c := gameworld.Change{Type: gameworld.Update, ID: id, Scopes: scopes}
	if len(props) > 0 {
		c.Properties = gameworld.PropertiesOf(props)
	}
	if err := s.apply([]gameworld.Change{c}); err != nil {
		return fail("%v", err)
	}
	return []any{"change_components", "ok"}
}

// removeEntity serves ["remove_entity", ID, "reparent"|"cascade"]. Cascade
// also removes the agent's descendants of the entity; reparent hands the
// agent's children to the entity's parent. Others' entities are left.
func (s *Session) removeEntity(body []json.RawMessage, fail func(string, ...any) []any) []any {
	var id, mode string
	if len(body) < 2 || json.Unmarshal(body[1], &id) != nil {
		return fail("remove_entity takes an entity id")
	}
	mode = "reparent"
	if len(body) > 2 && (json.Unmarshal(body[2], &mode) != nil || mode != "reparent" && mode != "cascade") {
		return fail("the mode is reparent or cascade")
	}
	world := s.b.node.World()
	o, ok := world.Get(id)
	if !ok {
		return fail("no entity %s", id)
	}
	me := s.agent.Identifier()
	if o.Owner != me {
		return fail("entity %s is not yours", id)
	}
	children := map[string][]string{}
	world.Range(func(c gameworld.Object) bool {
		if c.Owner == me {
			if p := parentOf(c.Properties); p != "" {
				children[p] = append(children[p], c.ID)
			}
		}
		return true
	})
	var changes []gameworld.Change
	if mode == "cascade" {
		seen := map[string]bool{id: true}
		for queue := []string{id}; len(queue) > 0; queue = queue[1:] {
			for _, c := range children[queue[0]] {
				if !seen[c] {
					seen[c] = true
					queue = append(queue, c)
					changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: c})
				}
			}
		}
	} else {
		rel := json.RawMessage("null")
		if p := parentOf(o.Properties); p != "" {
			rel = mustJSON(map[string]string{"parent": p})
		}
		for _, c := range children[id] {
			changes = append(changes, gameworld.Change{Type: gameworld.Update, ID: c, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"relationships": rel})})
		}
	}
	changes = append(changes, gameworld.Change{Type: gameworld.Remove, ID: id})
	if err := s.apply(changes); err != nil {
		return fail("%v", err)
	}
	return []any{"remove_entity", "ok"}
}

// parentOf returns the parent named by an entity's relationships component.
func parentOf(p gameworld.Properties) string {
	raw, ok := p.Get("relationships")
	if !ok || !strings.Contains(string(raw), "parent") {
		return ""
	}
	var rel struct {
		Parent string `json:"parent"`
	}
	json.Unmarshal(raw, &rel)
	return rel.Parent
}
