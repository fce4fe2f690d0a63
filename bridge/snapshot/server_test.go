package snapshot

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

type place struct {
	node *relay.Node
	srv  *Server
	ws   string
}

func startPlace(t testing.TB, opts Options) *place {
	t.Helper()
	return startPlaceWith(t, opts, relay.Options{Tick: 5 * time.Millisecond})
}

// startPlaceWith is startPlace with the node's options.
func startPlaceWith(t testing.TB, opts Options, nodeOpts relay.Options) *place {
	t.Helper()
	n, err := relay.New(nodeOpts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(n, "127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(n)
	t.Cleanup(func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
		hs.Close()
	})
	return &place{node: n, srv: s, ws: "ws" + strings.TrimPrefix(hs.URL, "http")}
}

// solipsist dials a WebSocket Solipsism client to the place's node.
func (p *place) solipsist(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sol, err := client.Dial(ctx, p.ws, client.Options{Prefix: "sol", Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sol.Close() })
	return sol
}

func dial(t testing.TB, addr string, opts ClientOptions) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lossyRelay forwards datagrams between one client and a server, dropping
// 20%, duplicating 5% and reordering within 3 packets, both ways.
type lossyRelay struct {
	front  *net.UDPConn // the client talks to this
	back   *net.UDPConn // this talks to the server
	mu     sync.Mutex
	client *net.UDPAddr
	r      *rand.Rand
}

func startLossy(t *testing.T, server net.Addr, seed uint64) *lossyRelay {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.DialUDP("udp", nil, server.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	l := &lossyRelay{front: front, back: back, r: rand.New(rand.NewPCG(seed, 7))}
	t.Cleanup(func() { front.Close(); back.Close() })
	go l.pump(func(b []byte) { l.back.Write(b) }, func(buf []byte) (int, error) {
		n, addr, err := front.ReadFromUDP(buf)
		if err == nil {
			l.mu.Lock()
			l.client = addr
			l.mu.Unlock()
		}
		return n, err
	})
	go l.pump(func(b []byte) {
		l.mu.Lock()
		to := l.client
		l.mu.Unlock()
		if to != nil {
			front.WriteToUDP(b, to)
		}
	}, back.Read)
	return l
}

func (l *lossyRelay) Addr() string { return l.front.LocalAddr().String() }

func (l *lossyRelay) pump(send func([]byte), read func([]byte) (int, error)) {
	var held [][]byte
	buf := make([]byte, 2048)
	for {
		n, err := read(buf)
		if err != nil {
			return
		}
		p := append([]byte(nil), buf[:n]...)
		l.mu.Lock()
		x := l.r.Float64()
		l.mu.Unlock()
		switch {
		case x < 0.20:
			continue // lost
		case x < 0.25:
			send(p) // duplicated
		case x < 0.40 && len(held) < 2:
			held = append(held, p) // overtaken by up to two others
			continue
		}
		send(p)
		for _, h := range held {
			send(h)
		}
		held = held[:0]
	}
}

func transform(x, z, yaw float64) gameworld.Properties {
	pos, _ := json.Marshal([]float64{x, 1.5, z})
	rot, _ := json.Marshal([]float64{0, math.Sin(yaw / 2), 0, math.Cos(yaw / 2)})
	return gameworld.PropertiesOf(map[string]json.RawMessage{"ghostType": json.RawMessage(`"transform"`), "position": pos, "rotation": rot})
}

// sameWorld compares the client's view with the node's, within the
// transform type's precision.
func sameWorld(server map[string]gameworld.Object, client map[string]gameworld.Properties) error {
	if len(server) != len(client) {
		return fmt.Errorf("%d objects, client has %d", len(server), len(client))
	}
	for id, o := range server {
		p, ok := client[id]
		if !ok {
			return fmt.Errorf("client lacks %s", id)
		}
		for _, k := range []string{"position", "rotation"} {
			var a, b []float64
			json.Unmarshal(o.Properties.Value(k), &a)
			json.Unmarshal(p.Value(k), &b)
			if len(a) != len(b) || !near(a, b, 1) && !(k == "rotation" && near(a, b, -1)) { // (q and −q: one rotation)
				return fmt.Errorf("%s.%s: %s vs %s", id, k, o.Properties.Value(k), p.Value(k))
			}
		}
	}
	return nil
}

// near reports whether a and sign × b are within the precision.
func near(a, b []float64, sign float64) bool {
	for i := range a {
		if math.Abs(a[i]-sign*b[i]) > 0.0015 {
			return false
		}
	}
	return true
}

func worldOf(n *relay.Node) map[string]gameworld.Object {
	out := map[string]gameworld.Object{}
	for _, o := range n.World().Objects() {
		out[o.ID] = o
	}
	return out
}

// TestLossyConvergence: 1,000 moving objects over 600 ticks through a
// relay that loses, duplicates and reorders; despawns, and objects removed
// and added again under the same id. Once traffic settles the client's
// world is the server's, within the quantization.
func TestLossyConvergence(t *testing.T) {
	p := startPlace(t, Options{Rate: 120})
	lossy := startLossy(t, p.srv.Addr(), 1)
	c := dial(t, lossy.Addr(), ClientOptions{})
	const n = 1000
	ids := make([]string, n)
	add := make([]gameworld.Change, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("obj-%04d", i)
		add[i] = gameworld.Change{Type: gameworld.Add, ID: ids[i], Properties: transform(float64(i), 0, 0)}
	}
	if _, err := p.node.Apply(add); err != nil {
		t.Fatal(err)
	}
	start := c.Tick()
	for step := 0; c.Tick()-start < 600; step++ {
		var ch []gameworld.Change
		for i, id := range ids {
			if i%10 == step%10 { // a tenth of them wait each step
				continue
			}
			ch = append(ch, gameworld.Change{Type: gameworld.Update, ID: id, Properties: transform(float64(i)+float64(step)*0.01, float64(step)*0.02, float64(step)*0.01)})
		}
		switch step {
		case 100: // despawns
			for _, id := range ids[:50] {
				ch = append(ch, gameworld.Change{Type: gameworld.Remove, ID: id})
			}
		case 200: // the same ids again, elsewhere
			for _, id := range ids[:50] {
				ch = append(ch, gameworld.Change{Type: gameworld.Add, ID: id, Properties: transform(-1, -1, 1)})
			}
		case 300: // removed and added again within one tick
			for _, id := range ids[50:60] {
				ch = append(ch, gameworld.Change{Type: gameworld.Remove, ID: id})
			}
		}
		if step == 100 {
			ch = ch[:0:0]
			for _, id := range ids[:50] {
				ch = append(ch, gameworld.Change{Type: gameworld.Remove, ID: id})
			}
		}
		if _, err := p.node.Apply(ch); err != nil {
			t.Fatal(err)
		}
		if step == 300 {
			var back []gameworld.Change
			for _, id := range ids[50:60] {
				back = append(back, gameworld.Change{Type: gameworld.Add, ID: id, Properties: transform(7, 7, 0)})
			}
			p.node.Apply(back)
		}
		time.Sleep(8 * time.Millisecond)
		if c.Err() != nil {
			t.Fatal(c.Err())
		}
	}
	waitFor(t, "the client's world to settle on the server's", 30*time.Second, func() bool {
		return sameWorld(worldOf(p.node), c.Objects()) == nil
	})
	// Removed and added again in one change set, now that nothing moves.
	var again []gameworld.Change
	for _, id := range ids[60:70] {
		again = append(again, gameworld.Change{Type: gameworld.Remove, ID: id}, gameworld.Change{Type: gameworld.Add, ID: id, Properties: transform(7, 7, 0)})
	}
	if _, err := p.node.Apply(again); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the re-added objects", 30*time.Second, func() bool {
		o := c.Objects()["obj-0065"]
		return !o.IsZero() && strings.HasPrefix(string(o.Value("position")), "[7,") && sameWorld(worldOf(p.node), c.Objects()) == nil
	})
}

// TestTypeListUnderLoss: 100 types arrive in chunks through the lossy
// relay, and objects of the last one replicate.
func TestTypeListUnderLoss(t *testing.T) {
	var types []GhostType
	for i := range 100 {
		types = append(types, GhostType{Name: fmt.Sprintf("kind%02d", i), Fields: []Field{{Property: "n", Kind: Int}, {Property: "label", Kind: String}}})
	}
	p := startPlace(t, Options{Types: types, Rate: 120})
	lossy := startLossy(t, p.srv.Addr(), 2)
	c := dial(t, lossy.Addr(), ClientOptions{Types: append([]GhostType{GenericType}, types...)})
	p.node.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "last", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{
		"ghostType": json.RawMessage(`"kind99"`), "n": json.RawMessage(`42`), "label": json.RawMessage(`"z"`)})}})
	waitFor(t, "every type to load and the object of the last to arrive", 20*time.Second, func() bool {
		o := c.Objects()["last"]
		return !o.IsZero() && string(o.Value("n")) == "42" && string(o.Value("ghostType")) == `"kind99"`
	})
	c.mu.Lock()
	loaded := len(c.w.loaded)
	c.mu.Unlock()
	if loaded != 101 {
		t.Errorf("loaded %d types, want 101", loaded)
	}
	// A type registered while the client is connected is announced too.
	late := GhostType{Name: "late", Fields: []Field{{Property: "n", Kind: Int}}}
	if err := p.srv.AddType(late); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, p.srv.Addr().String(), ClientOptions{Types: append([]GhostType{GenericType}, append(types, late)...)})
	p.node.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "newer", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"ghostType": json.RawMessage(`"late"`), "n": json.RawMessage(`7`)})}})
	waitFor(t, "the late type's object", 10*time.Second, func() bool { o := c2.Objects()["newer"]; return !o.IsZero() && string(o.Value("n")) == "7" })
	if o := c.Objects()["newer"]; !o.IsZero() {
		t.Errorf("a client without the late type got its object: %v", o)
	}
}

// TestTypeRule: a configured rule types objects without a ghostType.
func TestTypeRule(t *testing.T) {
	p := startPlace(t, Options{TypeOf: func(props gameworld.Properties) string {
		if _, ok := props.Get("position"); ok {
			return "transform"
		}
		return ""
	}})
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	plain := transform(1, 2, 0)
	plain = plain.Without("ghostType")
	plain = plain.With("extra", json.RawMessage(`1`))
	p.node.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "typed", Properties: plain},
		{Type: gameworld.Add, ID: "loose", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"color": json.RawMessage(`"red"`)})}})
	waitFor(t, "both objects", 5*time.Second, func() bool {
		o := c.Objects()
		return !o["typed"].IsZero() && !o["loose"].IsZero()
	})
	o := c.Objects()
	if string(o["typed"].Value("ghostType")) != `"transform"` || o["typed"].Value("extra") != nil || string(o["loose"].Value("color")) != `"red"` {
		t.Errorf("got %v", o)
	}
}

// TestHashMismatch: a type whose layout differs is refused on both sides.
func TestHashMismatch(t *testing.T) {
	p := startPlace(t, Options{Types: []GhostType{{Name: "thing", Fields: []Field{{Property: "n", Kind: Int}}}}})
	t.Run("the client disconnects", func(t *testing.T) {
		c := dial(t, p.srv.Addr().String(), ClientOptions{Types: []GhostType{GenericType, {Name: "thing", Fields: []Field{{Property: "n", Kind: Bool}}}}})
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the client did not disconnect")
		}
		if !errors.Is(c.Err(), ErrHashMismatch) {
			t.Fatalf("client ended with %v", c.Err())
		}
		waitFor(t, "the server to forget the client", 5*time.Second, func() bool { return clients(p.srv) == 0 })
	})
	t.Run("the server refuses a client that claims them", func(t *testing.T) {
		raw := handshake(t, p.srv.Addr())
		var w Writer
		cmd := command{Tick: 1, Loaded: 2, Digest: digest([]uint32{GenericType.Hash(), 12345})}
		cmd.write(&w)
		raw.Write(w.Bytes())
		buf := make([]byte, MaxPacket)
		raw.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			n, err := raw.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if buf[0] == msgDisconnect {
				if n < 2 || buf[1] != ReasonHashMismatch {
					t.Fatalf("disconnect % x", buf[:n])
				}
				break
			}
		}
		waitFor(t, "the server to drop it", 5*time.Second, func() bool { return clients(p.srv) == 0 })
	})
}

func clients(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// handshake connects a raw UDP socket through the cookie exchange.
func handshake(t *testing.T, server net.Addr) *net.UDPConn {
	t.Helper()
	raw, err := net.DialUDP("udp", nil, server.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	req := make([]byte, connectSize)
	req[0] = msgConnect
	binary.LittleEndian.PutUint32(req[1:], 77)
	binary.LittleEndian.PutUint16(req[5:], Version)
	raw.Write(req)
	buf := make([]byte, MaxPacket)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := raw.Read(buf)
	if err != nil || buf[0] != msgChallenge || n != challengeSize {
		t.Fatalf("challenge: % x, %v", buf[:n], err)
	}
	raw.Write(append([]byte{msgResponse}, buf[1:n]...))
	n, err = raw.Read(buf)
	if err != nil || buf[0] != msgAccept {
		t.Fatalf("accept: % x, %v", buf[:n], err)
	}
	return raw
}

// TestNoAmplification: a first packet from an unproven source gets at most
// a reply no larger than itself, and no snapshot ever.
func TestNoAmplification(t *testing.T) {
	p := startPlace(t, Options{})
	p.node.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "x", Properties: transform(1, 2, 3)}})
	raw, err := net.DialUDP("udp", nil, p.srv.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	buf := make([]byte, MaxPacket)
	for _, c := range []struct {
		name string
		pkt  []byte
	}{
		{"short connect", []byte{msgConnect, 1, 2, 3, 4}},
		{"full connect", append([]byte{msgConnect, 1, 2, 3, 4, Version, 0}, make([]byte, connectSize-7)...)},
		{"connect of another version", append([]byte{msgConnect, 1, 2, 3, 4}, make([]byte, connectSize-5)...)},
		{"forged cookie", append([]byte{msgResponse, 1, 2, 3, 4}, make([]byte, 16)...)},
		{"command without a handshake", func() []byte { var w Writer; (&command{Tick: 1, Loaded: 2}).write(&w); return w.Bytes() }()},
		{"garbage", []byte{0xff, 0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw.Write(c.pkt)
			deadline := time.Now().Add(300 * time.Millisecond)
			for {
				raw.SetReadDeadline(deadline)
				n, err := raw.Read(buf)
				if err != nil {
					return // nothing (more) came back
				}
				if n > len(c.pkt) {
					t.Fatalf("a %d-byte packet brought back %d bytes (% x)", len(c.pkt), n, buf[:min(n, 16)])
				}
				if buf[0] == msgSnapshot {
					t.Fatal("a snapshot reached an unverified source")
				}
			}
		})
	}
}

// TestOwnership: a UDP client's object, moved through its commands, is
// seen by a WebSocket Solipsism client; its forged update of someone
// else's object is refused; when it goes silent its objects go.
func TestOwnership(t *testing.T) {
	p := startPlace(t, Options{Timeout: 500 * time.Millisecond})
	sol := p.solipsist(t)
	rock, _ := sol.Create(map[string]any{"kind": "rock"})

	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	c.Set("udp-ball", map[string]any{"ghostType": "transform", "position": []float64{1, 2, 3}, "rotation": []float64{0, 0, 0, 1}})
	waitFor(t, "the Solipsism client to see the UDP client's ball", 5*time.Second, func() bool {
		o, ok := sol.World().Get("udp-ball")
		return ok && o.Owner == c.Identifier()
	})
	c.Set("udp-ball", map[string]any{"ghostType": "transform", "position": []float64{4, 5, 6}, "rotation": []float64{0, 0, 0, 1}})
	waitFor(t, "the move", 5*time.Second, func() bool {
		o, _ := sol.World().Get("udp-ball")
		return string(o.Properties.Value("position")) == "[4,5,6]"
	})
	waitFor(t, "the UDP client to see the rock", 5*time.Second, func() bool { return !c.Objects()[rock].IsZero() })

	c.Set(rock, map[string]any{"kind": "gold"})
	time.Sleep(200 * time.Millisecond)
	if o, _ := sol.World().Get(rock); string(o.Properties.Value("kind")) != `"rock"` {
		t.Fatalf("forged update applied: %s", o.Properties.Value("kind"))
	}

	// Silent: the socket closes without a goodbye.
	c.stop(nil, 0)
	waitFor(t, "the silent client's ball to go", 5*time.Second, func() bool {
		_, ok := sol.World().Get("udp-ball")
		return !ok
	})
	if _, ok := sol.World().Get(rock); !ok {
		t.Error("the rock went too")
	}
}

// A client the server timed out (reason 2: a network outage longer than
// the timeout, say) connects again and follows the world afresh, as after
// a restart.
func TestTimedOutClientComesBack(t *testing.T) {
	p := startPlace(t, Options{})
	w := p.solipsist(t)
	if err := w.CreateWithID("ball", map[string]any{"ghostType": "transform", "position": []float64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	waitFor(t, "the ball", 5*time.Second, func() bool { return !c.Objects()["ball"].IsZero() })
	p.srv.mu.Lock()
	for _, sc := range p.srv.clients {
		p.srv.send(sc.addr, []byte{msgDisconnect, ReasonTimeout})
		p.srv.dropLocked(sc)
	}
	p.srv.mu.Unlock()
	waitFor(t, "the client to connect again", 10*time.Second, func() bool { return c.Resyncs() > 0 && clients(p.srv) == 1 })
	if err := w.Set("ball", map[string]any{"position": []float64{4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ball's move", 5*time.Second, func() bool { return strings.HasPrefix(string(c.Objects()["ball"].Value("position")), "[4,") })
}

// serverTick reads the server's tick number.
func serverTick(s *Server) uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tick
}

// TestServerSleepsWithoutClients: a server without clients does not tick
// (the node sends it nothing then); the first client that connects wakes
// it and is sent the world as it is, changes made while it slept
// included, and the server sleeps again when the client leaves.
func TestServerSleepsWithoutClients(t *testing.T) {
	p := startPlace(t, Options{Rate: 60})
	w := p.solipsist(t)
	if err := w.CreateWithID("ball", map[string]any{"ghostType": "transform", "position": []float64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	still := func(what string) {
		t.Helper()
		// (A tick under way when the last client left may end.)
		time.Sleep(50 * time.Millisecond)
		before := serverTick(p.srv)
		time.Sleep(300 * time.Millisecond) // 18 ticks at 60 Hz
		if after := serverTick(p.srv); after != before {
			t.Fatalf("%s: the server ticked %d times without a client", what, after-before)
		}
	}
	still("before any client")
	c := dial(t, p.srv.Addr().String(), ClientOptions{})
	waitFor(t, "the ball", 5*time.Second, func() bool { return strings.HasPrefix(string(c.Objects()["ball"].Value("position")), "[1,") })
	before := serverTick(p.srv)
	time.Sleep(100 * time.Millisecond)
	if serverTick(p.srv) == before {
		t.Fatal("the server does not tick with a client")
	}
	c.Close()
	waitFor(t, "the client to leave", 5*time.Second, func() bool { return clients(p.srv) == 0 })
	if err := w.Set("ball", map[string]any{"position": []float64{4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	still("after the client left")
	c2 := dial(t, p.srv.Addr().String(), ClientOptions{})
	waitFor(t, "the ball where it went meanwhile", 5*time.Second, func() bool { return strings.HasPrefix(string(c2.Objects()["ball"].Value("position")), "[4,") })
}

// TestServerLetsTheWorldGoWithoutClients: when its last client leaves,
// the node hides the world from the server while its next tick may
// already have taken its inbox. The removes must still be taken before
// the server sleeps: one that slept on them held a load's ghosts, and
// its deliveries, until the next client came.
func TestServerLetsTheWorldGoWithoutClients(t *testing.T) {
	p := startPlace(t, Options{Rate: 1000})
	const objects = 2000
	changes := make([]gameworld.Change, objects)
	for i := range changes {
		changes[i] = gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o-%d", i),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage(`[0,0,0]`)})}
	}
	if _, err := p.node.Apply(changes); err != nil {
		t.Fatal(err)
	}
	held := func() (ghosts, clients, waiting int) {
		p.srv.mu.Lock()
		defer p.srv.mu.Unlock()
		return len(p.srv.objects), len(p.srv.clients), p.srv.inbox.Len()
	}
	for round := range 10 {
		c := dial(t, p.srv.Addr().String(), ClientOptions{})
		waitFor(t, "the world", 10*time.Second, func() bool { g, _, _ := held(); return g >= objects })
		c.Close()
		waitFor(t, "the client to leave", 5*time.Second, func() bool { _, n, _ := held(); return n == 0 })
		time.Sleep(100 * time.Millisecond) // 100 ticks, were it awake
		if ghosts, _, waiting := held(); ghosts != 0 || waiting != 0 {
			t.Fatalf("round %d: the sleeping server holds %d ghosts, and %d deliveries wait for it", round, ghosts, waiting)
		}
	}
}
