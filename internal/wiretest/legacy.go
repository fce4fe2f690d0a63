package wiretest

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// LegacyServer behaves like the 2016 JavaScript library's GameServer: it asks
// each connection for metadata (answered with metadataChange by that
// library's clients), then asks for a refresh and sends everything not owned
// by the connection's identifierChain; it relays every change to every other
// connection except the owners', trusts whatever it is sent, and knows no
// "refreshed" marker. Where the real library would crash — an unknown
// message type, a remove of an unknown id, an add and a remove of one id in
// one message — it records the crash and drops the connection.
type LegacyServer struct {
	ID string
	// MetadataDelay delays the answer to requestMetadata.
	MetadataDelay time.Duration

	mu      sync.Mutex
	objects map[string]*Object
	conns   map[*legacyConn]bool
	crashes []string
	early   int
}

// EarlyRefreshes counts requestRefresh messages that arrived before the
// server had answered that connection's requestMetadata.
func (s *LegacyServer) EarlyRefreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.early
}

type legacyConn struct {
	c     *websocket.Conn
	chain map[string]bool
	wmu   sync.Mutex
	// answered: our metadata answer has been sent.
	answered bool
}

// NewLegacyServer returns a 2016-style server with the given identifier.
func NewLegacyServer(id string) *LegacyServer {
	return &LegacyServer{ID: id, objects: map[string]*Object{}, conns: map[*legacyConn]bool{}}
}

// Crashes returns what would have crashed the 2016 server.
func (s *LegacyServer) Crashes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.crashes...)
}

// Objects returns a copy of the server's world.
func (s *LegacyServer) Objects() map[string]Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyObjects(s.objects)
}

func (lc *legacyConn) send(v any) {
	b, _ := json.Marshal(v)
	lc.wmu.Lock()
	defer lc.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lc.c.Write(ctx, websocket.MessageText, b)
}

// ServeHTTP accepts a WebSocket connection and serves it.
func (s *LegacyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(64 << 20)
	lc := &legacyConn{c: c}
	s.mu.Lock()
	s.conns[lc] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, lc)
		s.mu.Unlock()
		c.CloseNow()
	}()
	lc.send([]any{"requestMetadata"})
	for {
		_, b, err := c.Read(context.Background())
		if err != nil {
			return
		}
		var msg []json.RawMessage
		if json.Unmarshal(b, &msg) != nil || len(msg) == 0 {
			s.crash("unparseable message")
			return
		}
		var typ string
		json.Unmarshal(msg[0], &typ)
		switch typ {
		case "metadataChange", "metadata":
			var md struct {
				IdentifierChain []string `json:"identifierChain"`
			}
			json.Unmarshal(msg[1], &md)
			s.mu.Lock()
			lc.chain = map[string]bool{}
			for _, id := range md.IdentifierChain {
				lc.chain[id] = true
			}
			s.mu.Unlock()
			lc.send([]any{"requestRefresh"})
			s.sendRefresh(lc)
		case "requestMetadata":
			answer := func() {
				// Marked first: the reply to it may be read before send returns.
				s.mu.Lock()
				lc.answered = true
				s.mu.Unlock()
				lc.send([]any{"metadataChange", map[string]any{"identifier": s.ID, "identifierChain": []string{s.ID}}})
			}
			if s.MetadataDelay > 0 {
				time.AfterFunc(s.MetadataDelay, answer)
			} else {
				answer()
			}
		case "requestRefresh":
			s.mu.Lock()
			if !lc.answered {
				s.early++
			}
			s.mu.Unlock()
			s.sendRefresh(lc)
		case "worldChange":
			var wc struct {
				Changes []wireChange `json:"changes"`
			}
			json.Unmarshal(msg[1], &wc)
			if !s.apply(lc, wc.Changes) {
				return
			}
		case "requestLessData", "requestMoreData":
		default:
			s.crash("unknown message type " + typ)
			return
		}
	}
}

func (s *LegacyServer) crash(why string) {
	s.mu.Lock()
	s.crashes = append(s.crashes, why)
	s.mu.Unlock()
}

func (s *LegacyServer) sendRefresh(lc *legacyConn) {
	s.mu.Lock()
	var changes []wireChange
	for id, o := range s.objects {
		if lc.chain != nil && !lc.chain[o.Owner] {
			// A copy: the answer is encoded after unlocking, while
			// later changes may update the object.
			changes = append(changes, wireChange{Type: "add", ID: id, Owner: o.Owner, Properties: maps.Clone(o.Properties)})
		}
	}
	s.mu.Unlock()
	if len(changes) > 0 {
		lc.send([]any{"worldChange", map[string]any{"timestamp": time.Now().UnixMilli(), "changes": changes}})
	}
}

// apply applies changes as the library does and relays them; it returns
// false where the library would have crashed.
func (s *LegacyServer) apply(from *legacyConn, changes []wireChange) bool {
	s.mu.Lock()
	seen := map[string]string{}
	for _, c := range changes {
		if prev, ok := seen[c.ID]; ok && ((prev == "add" && c.Type == "remove") || (prev == "remove" && c.Type == "add")) {
			s.crashes = append(s.crashes, "add and remove of "+c.ID+" in one message")
			s.mu.Unlock()
			return false
		}
		seen[c.ID] = c.Type
		if problem := applyLikeJS(s.objects, c); problem != "" {
			s.crashes = append(s.crashes, problem)
			s.mu.Unlock()
			return false
		}
	}
	var targets []*legacyConn
	var chains []map[string]bool // read under the lock: metadata replaces them
	for lc := range s.conns {
		if lc != from && lc.chain != nil {
			targets = append(targets, lc)
			chains = append(chains, lc.chain)
		}
	}
	s.mu.Unlock()
	for i, lc := range targets {
		var out []wireChange
		for _, c := range changes {
			if !chains[i][c.Owner] {
				out = append(out, c)
			}
		}
		if len(out) > 0 {
			lc.send([]any{"worldChange", map[string]any{"timestamp": time.Now().UnixMilli(), "changes": out}})
		}
	}
	return true
}
