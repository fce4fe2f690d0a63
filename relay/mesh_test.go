package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/ownership"
)

// meshNode is a server node in a test mesh.
type meshNode struct {
	node *relay.Node
	mesh *cluster.Mesh
	url  string
	srv  *httptest.Server
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// meshLogs holds the logs of the mesh nodes each test started, so that a
// divergence one node repaired is shown beside what the others did.
var (
	meshLogsMu sync.Mutex
	meshLogs   = map[testing.TB][]meshLog{}
)

type meshLog struct {
	id   string
	logs *syncBuffer
}

// startMeshNode starts a server on 127.0.0.1 and joins it to the mesh at
// join (empty: a new mesh). Failure detection is tuned to find a dead node
// within about 2 s.
func startMeshNode(t testing.TB, join string, mo cluster.Options) *meshNode {
	t.Helper()
	return startMeshNodeWith(t, join, mo, relay.Options{})
}

// startMeshNodeWith is startMeshNode with the node's options.
func startMeshNodeWith(t testing.TB, join string, mo cluster.Options, opts relay.Options) *meshNode {
	t.Helper()
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.DigestInterval == 0 {
		opts.DigestInterval = testDigestInterval
	}
	n, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	meshLogsMu.Lock()
	if meshLogs[t] == nil {
		t.Cleanup(func() { meshLogsMu.Lock(); delete(meshLogs, t); meshLogsMu.Unlock() })
	}
	meshLogs[t] = append(meshLogs[t], meshLog{n.Identifier(), logs})
	meshLogsMu.Unlock()
	t.Cleanup(func() {
		if r := n.Repairs(); !repairsAllowed[n] && r[relay.RepairMissing]+r[relay.RepairStale]+r[relay.RepairExtra] > 0 {
			// (Every mesh node's log: the divergence began at another.)
			var all strings.Builder
			meshLogsMu.Lock()
			for _, l := range meshLogs[t] {
				fmt.Fprintf(&all, "--- log of %s:\n%s\n", l.id, l.logs)
			}
			meshLogsMu.Unlock()
			t.Errorf("mesh node %s repaired divergences in a run without faults: %v\n%s", n.Identifier(), r, all.String())
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/ws", n)
	srv := httptest.NewServer(mux)
	mo.BindAddr = "127.0.0.1:0"
	mo.AdvertiseURL = wiretest.WSURL(srv)
	mo.Profile = "local"
	if mo.ProbeInterval == 0 {
		mo.ProbeInterval = 250 * time.Millisecond
	}
	mo.MinBackoff, mo.MaxBackoff = 20*time.Millisecond, 300*time.Millisecond
	if mo.JoinRetry == 0 {
		mo.JoinRetry = 500 * time.Millisecond
	}
	if join != "" {
		mo.Join = []string{join}
	}
	m, err := cluster.Join(n, mo)
	if err != nil {
		t.Fatal(err)
	}
	mn := &meshNode{node: n, mesh: m, url: wiretest.WSURL(srv), srv: srv, logs: logs}
	t.Cleanup(func() {
		m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
		srv.Close()
		if t.Failed() && testing.Verbose() {
			t.Logf("log of %s:\n%s", n.Identifier(), logs.String())
		}
	})
	return mn
}

// crash stops a node the way kill -9 would look to the others: no Leave,
// connections cut.
func (mn *meshNode) crash() {
	mn.mesh.Kill()
	mn.srv.CloseClientConnections()
	mn.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mn.node.Close(ctx)
}

func meshLinks(n *relay.Node) int {
	c := 0
	for _, l := range n.Links() {
		if l.Kind == "mesh" && l.Ready {
			c++
		}
	}
	return c
}

// worldDigest describes a world exactly: ids, owners, properties.
func worldDigest(w *gameworld.World) string {
	var sb strings.Builder
	for _, o := range w.Objects() {
		keys := make([]string, 0, o.Properties.Len())
		for k := range o.Properties.All() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&sb, "%s@%s{", o.ID, o.Owner)
		for _, k := range keys {
			fmt.Fprintf(&sb, "%s=%s;", k, o.Properties.Value(k))
		}
		sb.WriteString("}\n")
	}
	return sb.String()
}

// waitIdentical waits until every node's world equals the first's and
// returns its digest.
func waitIdentical(t testing.TB, nodes []*meshNode) string {
	t.Helper()
	var want string
	waitFor(t, "identical worlds", 5*time.Second, func() bool {
		want = worldDigest(nodes[0].node.World())
		for _, mn := range nodes[1:] {
			if worldDigest(mn.node.World()) != want {
				return false
			}
		}
		return true
	})
	return want
}

func startMesh(t *testing.T, size int, mo cluster.Options) []*meshNode {
	t.Helper()
	return startMeshWith(t, size, mo, relay.Options{})
}

// startMeshWith is startMesh with the nodes' options.
func startMeshWith(t testing.TB, size int, mo cluster.Options, opts relay.Options) []*meshNode {
	t.Helper()
	nodes := []*meshNode{startMeshNodeWith(t, "", mo, opts)}
	for i := 1; i < size; i++ {
		nodes = append(nodes, startMeshNodeWith(t, nodes[0].mesh.Addr(), mo, opts))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		full := true
		for _, mn := range nodes {
			full = full && meshLinks(mn.node) == size-1
		}
		if full {
			return nodes
		}
		if time.Now().After(deadline) {
			for _, mn := range nodes {
				st := mn.node.MeshStatus()
				var ms []string
				for _, m := range st.Members {
					ms = append(ms, fmt.Sprintf("%s linked=%v", m.Name[:8], m.Linked))
				}
				var ls []string
				for _, l := range mn.node.Links() {
					ls = append(ls, fmt.Sprintf("%s ready=%v", l.Identifier, l.Ready))
				}
				t.Logf("%s (%s): members %v; links %v; memberlist sees %d", mn.node.Identifier(), mn.mesh.Name()[:8], ms, ls, mn.mesh.NumMembers())
			}
			t.Fatal("timed out waiting for a full mesh")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMeshFiveNodes(t *testing.T) {
	// A dead member's worlds are held for the reclaim grace, in case their
	// peers reconnect elsewhere (MemberGone).
	const grace = 500 * time.Millisecond
	nodes := startMeshWith(t, 5, cluster.Options{}, relay.Options{ReclaimGrace: grace})
	clients := make([]*wiretest.Peer, len(nodes))
	for i, mn := range nodes {
		clients[i] = wiretest.Dial(t, mn.url, fmt.Sprintf("client-%08d-mesh0000", i), wiretest.Options{})
	}
	t.Run("every client sees every other client", func(t *testing.T) {
		for i, c := range clients {
			c.Change(wiretest.Add(fmt.Sprintf("obj-%d", i), c.ID, props{"node": i, "pos": []int{i, 0, 0}}))
		}
		for i, c := range clients {
			for j := range clients {
				if i != j {
					c.WaitProp(fmt.Sprintf("obj-%d", j), "node", fmt.Sprint(j))
				}
			}
		}
		clients[0].Change(wiretest.Update("obj-0", clients[0].ID, props{"pos": []int{9, 9, 9}}))
		for _, c := range clients[1:] {
			c.WaitProp("obj-0", "pos", "[9,9,9]")
		}
	})
	t.Run("all five worlds are identical", func(t *testing.T) {
		if want := waitIdentical(t, nodes); strings.Count(want, "\n") != 5 {
			t.Fatalf("world has the wrong objects:\n%s", want)
		}
	})
	t.Run("exactly one link per pair", func(t *testing.T) {
		for _, mn := range nodes {
			if got := meshLinks(mn.node); got != 4 {
				t.Errorf("%s has %d mesh links", mn.node.Identifier(), got)
			}
			st := mn.node.MeshStatus()
			if len(st.Members) != 4 {
				t.Errorf("%s sees %d members", mn.node.Identifier(), len(st.Members))
			}
			for _, m := range st.Members {
				if !m.Linked {
					t.Errorf("%s: member %s not linked", mn.node.Identifier(), m.Name)
				}
			}
		}
	})
	t.Run("a node dies without leaving", func(t *testing.T) {
		dead := nodes[4]
		start := time.Now()
		dead.crash()
		for i, c := range clients[:4] {
			c.Wait("obj-4 gone", grace+5*time.Second, func(m map[string]wiretest.Object) bool { _, ok := m["obj-4"]; return !ok })
			if _, ok := nodes[i].node.World().Get("obj-4"); ok {
				t.Errorf("node %d still holds obj-4", i)
			}
		}
		d := time.Since(start)
		if d > grace+3*time.Second {
			t.Errorf("dead node's objects removed after %s, want within the grace (%s) and 3s", d, grace)
		}
		t.Logf("dead node's objects gone everywhere after %s", d)
		// Survivors keep everything else.
		for _, c := range clients[:4] {
			if got := len(c.Objects()); got != 3 {
				t.Errorf("%s sees %d objects after the crash, want 3", c.ID, got)
			}
		}
	})
	t.Run("it restarts under a new name and the world converges", func(t *testing.T) {
		reborn := startMeshNode(t, nodes[0].mesh.Addr(), cluster.Options{})
		if reborn.mesh.Name() == nodes[4].mesh.Name() {
			t.Fatal("restarted node reused its memberlist name")
		}
		// (Joining takes a busy machine a while: the checks below are of
		// convergence once the member is in, not of how fast it gets in.)
		for deadline := time.Now().Add(20 * time.Second); meshLinks(reborn.node) != 4; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				// What each side sees, to tell gossip that has not
				// spread from links that do not come up.
				for _, mn := range append(nodes[:4:4], reborn) {
					var links []string
					for _, l := range mn.node.Links() {
						links = append(links, fmt.Sprintf("%s %s ready=%v", l.Kind, l.Identifier, l.Ready))
					}
					t.Logf("%s: mesh %+v; links %v", mn.node.Identifier(), mn.node.MeshStatus(), links)
				}
				t.Fatalf("the restarted node linked to %d of the four others after 20 s", meshLinks(reborn.node))
			}
		}
		c := wiretest.Dial(t, reborn.url, clients[4].ID, wiretest.Options{})
		c.Change(wiretest.Add("obj-4", c.ID, props{"node": 4, "pos": []int{4, 0, 0}}))
		for _, other := range clients[:4] {
			other.WaitProp("obj-4", "node", "4")
		}
		c.Wait("full world", 5*time.Second, func(m map[string]wiretest.Object) bool { return len(m) == 4 })
		waitIdentical(t, []*meshNode{nodes[0], nodes[1], nodes[2], nodes[3], reborn})
	})
	for _, c := range clients {
		c.CheckClean()
	}
}

// Cutting a mesh link while both nodes live removes nothing anywhere; the
// link comes back and what changed meanwhile converges.
func TestMeshLinkCut(t *testing.T) {
	nodes := startMesh(t, 3, cluster.Options{})
	a, b := nodes[0], nodes[1]
	ca := wiretest.Dial(t, a.url, "client-AAAAAAAA-cut00000", wiretest.Options{})
	cb := wiretest.Dial(t, b.url, "client-BBBBBBBB-cut00000", wiretest.Options{})
	ca.Change(wiretest.Add("a1", ca.ID, props{"v": 1}), wiretest.Add("a2", ca.ID, props{"v": 1}))
	cb.Change(wiretest.Add("b1", cb.ID, props{"v": 1}))
	cb.WaitHas("a2")
	ca.WaitHas("b1")

	var mu sync.Mutex
	var removed []string
	for _, mn := range nodes {
		mn.node.World().Subscribe(func(ap gameworld.Applied) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range ap.Records {
				if r.Type == gameworld.Remove {
					removed = append(removed, r.ID)
				}
			}
		})
	}
	cut := func() {
		a.node.CloseLinks(ownership.Mesh, b.mesh.Name(), websocketGoingAway, "cut for test")
	}
	// Cut it several times; each time the dialing side re-dials.
	for i := 0; i < 3; i++ {
		cut()
		time.Sleep(30 * time.Millisecond)
	}
	ca.Change(wiretest.Update("a1", ca.ID, props{"v": 2}))
	waitFor(t, "link back", 5*time.Second, func() bool { return meshLinks(a.node) == 2 && meshLinks(b.node) == 2 })
	cb.WaitProp("a1", "v", "2")
	mu.Lock()
	if len(removed) > 0 {
		t.Errorf("objects removed while a link flapped: %v", removed)
	}
	mu.Unlock()

	// A removal during a cut reaches the other side once the link is back.
	cut()
	ca.Change(wiretest.Remove("a2", ca.ID))
	cb.WaitGone("a2")
	waitIdentical(t, nodes)
	ca.CheckClean()
	cb.CheckClean()
}

const websocketGoingAway = 1001

// A mesh peer may only write objects owned by the chain it advertised, and
// with a secret, a link without the right credentials is not accepted.
func TestMeshRefusesForgery(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	nodes := startMesh(t, 2, cluster.Options{SecretKey: secret})
	a, b := nodes[0], nodes[1]
	victim := wiretest.Dial(t, a.url, "client-VVVVVVVV-VVVVVVVV", wiretest.Options{})
	victim.Change(wiretest.Add("v", victim.ID, props{"hp": 100}))
	waitFor(t, "b sees v", 5*time.Second, func() bool { _, ok := b.node.World().Get("v"); return ok })

	// No credentials: refused before the upgrade.
	hdr := http.Header{}
	hdr.Set(relay.MeshNameHeader, b.mesh.Name())
	_, resp, err := websocket.Dial(context.Background(), a.url, &websocket.DialOptions{HTTPHeader: hdr})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("mesh link without credentials: err=%v resp=%v", err, resp)
	}

	// Valid credentials (as member b), forged ownership: refused.
	hdr.Set(cluster.AuthHeader, a.mesh.Auth(b.mesh.Name()))
	c, _, err := websocket.Dial(context.Background(), a.url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	send := func(s string) {
		if err := c.Write(context.Background(), websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	bID := b.node.Identifier()
	send(`["metadata",{"identifier":"` + bID + `","identifierChain":["` + bID + `","client-FORGERXX-FORGERXX"]}]`)
	before := refusedCount(a.node)
	send(`["worldChange",{"timestamp":1700000000000,"changes":[{"type":"update","id":"v","owner":"client-VVVVVVVV-VVVVVVVV","properties":{"hp":0}},{"type":"add","id":"fake","owner":"client-NOTINCHAIN-00","properties":{}}]}]`)
	send(`["worldChange",{"timestamp":1700000000000,"changes":[{"type":"add","id":"legit","owner":"client-FORGERXX-FORGERXX","properties":{}}]}]`)
	waitFor(t, "legit object accepted", 5*time.Second, func() bool { _, ok := a.node.World().Get("legit"); return ok })
	if got := refusedCount(a.node) - before; got < 2 {
		t.Fatalf("refused %d forged records, want 2", got)
	}
	if o, _ := a.node.World().Get("v"); string(o.Properties.Value("hp")) != "100" {
		t.Fatalf("forged update applied: %s", o.Properties.Value("hp"))
	}
	if _, ok := a.node.World().Get("fake"); ok {
		t.Fatal("forged add applied")
	}
}

func TestMeshWrongSecretOrLabel(t *testing.T) {
	good := startMeshNode(t, "", cluster.Options{SecretKey: bytes.Repeat([]byte{1}, 32), Label: "blue"})
	tests := []struct {
		name string
		mo   cluster.Options
	}{
		{"wrong secret", cluster.Options{SecretKey: bytes.Repeat([]byte{2}, 32), Label: "blue"}},
		{"no secret", cluster.Options{Label: "blue"}},
		{"wrong label", cluster.Options{SecretKey: bytes.Repeat([]byte{1}, 32), Label: "green"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := startMeshNode(t, good.mesh.Addr(), tt.mo)
			time.Sleep(500 * time.Millisecond)
			if st := bad.node.MeshStatus(); st.Joined || len(st.Members) != 0 {
				t.Fatalf("joined anyway: %+v", st)
			}
			if st := good.node.MeshStatus(); len(st.Members) != 0 {
				t.Fatalf("the good node admitted it: %+v", st)
			}
			if l := bad.logs.String(); !strings.Contains(l, "could not join the mesh") || !strings.Contains(l, "mesh-secret") {
				t.Fatalf("log does not say why:\n%s", l)
			}
		})
	}
}

// TestMeshWarnsUnencrypted: a mesh without a secret says so at WARN; one
// with a secret does not.
func TestMeshWarnsUnencrypted(t *testing.T) {
	open := startMeshNode(t, "", cluster.Options{})
	if !strings.Contains(open.logs.String(), `level=WARN msg="the mesh runs unencrypted`) {
		t.Fatalf("no warning:\n%s", open.logs.String())
	}
	sealed := startMeshNode(t, "", cluster.Options{SecretKey: []byte(strings.Repeat("k", 32))})
	if strings.Contains(sealed.logs.String(), "unencrypted") {
		t.Fatalf("a warning with a secret:\n%s", sealed.logs.String())
	}
}

// TestLeavingLogsNoLoss: a node that leaves the mesh (shutting down) does
// not report its own closing links as lost.
func TestLeavingLogsNoLoss(t *testing.T) {
	nodes := startMesh(t, 2, cluster.Options{})
	if err := nodes[0].mesh.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the links closed", 5*time.Second, func() bool { return meshLinks(nodes[0].node) == 0 })
	if strings.Contains(nodes[0].logs.String(), "mesh link lost") {
		t.Fatalf("a leaving node reported a lost link:\n%s", nodes[0].logs.String())
	}
}
