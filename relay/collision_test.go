package relay_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// worldDiff describes how world w differs from the node's world ref ("" if
// it does not): every object, its owner, epoch and properties.
func worldDiff(w, ref *gameworld.World) string {
	var diffs []string
	ref.Range(func(o gameworld.Object) bool {
		v, ok := w.Get(o.ID)
		switch {
		case !ok:
			diffs = append(diffs, "lacks "+o.ID)
		case v.Owner != o.Owner || v.Epoch != o.Epoch:
			diffs = append(diffs, fmt.Sprintf("%s owned by %s at epoch %d, not %s at %d", o.ID, v.Owner, v.Epoch, o.Owner, o.Epoch))
		case v.Digest != o.Digest:
			diffs = append(diffs, o.ID+" has other properties")
		}
		return true
	})
	w.Range(func(o gameworld.Object) bool {
		if _, ok := ref.Get(o.ID); !ok {
			diffs = append(diffs, "has "+o.ID+", which the node has not")
		}
		return true
	})
	slices.Sort(diffs)
	if len(diffs) > 10 {
		return fmt.Sprintf("%s; and %d more", strings.Join(diffs[:10], "; "), len(diffs)-10)
	}
	return strings.Join(diffs, "; ")
}

// TestCreatedTwice: two clients create an object with one id at about the
// same time (the first tab of a demo puts the shared ball down). The node
// keeps the first and refuses the second; the second client, which
// believed the object its own, is told who owns it and ends with the
// node's world, directly and through a proxy. A 2016-style peer that does
// the same is sent nothing it does not understand.
func TestCreatedTwice(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		t.Run(fmt.Sprint("proxy=", viaProxy), func(t *testing.T) {
			// A slow tick at the node: the second creator has not heard
			// of the first's object when it creates its own.
			srv, url := startNode(t, relay.Options{Tick: 300 * time.Millisecond})
			first := dialClient(t, url, "first")
			second, secondURL := (*client.Client)(nil), url
			var proxy *relay.Node
			if viaProxy {
				proxy, secondURL = startProxy(t, url, relay.Options{Tick: 2 * time.Millisecond})
			}
			second = dialClient(t, secondURL, "second")
			legacy := wiretest.Dial(t, secondURL, "legacy-AAAAAAAA-BBBBBBBB", wiretest.Options{})

			var id string
			for attempt := 0; ; attempt++ {
				id = fmt.Sprint("ball-", attempt)
				if err := first.CreateWithID(id, map[string]any{"by": "first"}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the node holds the first's object", 5*time.Second, func() bool { _, ok := srv.World().Get(id); return ok })
				if _, ok := second.World().Get(id); ok {
					if attempt == 5 {
						t.Fatal("the second client always heard of the object before creating its own")
					}
					continue
				}
				if err := second.CreateWithID(id, map[string]any{"by": "second"}); err != nil {
					t.Fatal(err)
				}
				legacy.Change(map[string]any{"type": "add", "id": id, "owner": "legacy-AAAAAAAA-BBBBBBBB", "properties": map[string]any{"by": "legacy"}})
				break
			}
			ownerIs(t, id, first.Identifier(), srv.World(), first.World(), second.World())
			worlds := map[string]*gameworld.World{"first": first.World(), "second": second.World()}
			if proxy != nil {
				worlds["proxy"] = proxy.World()
			}
			waitFor(t, "every world is the node's", 5*time.Second, func() bool {
				for _, w := range worlds {
					if worldDiff(w, srv.World()) != "" {
						return false
					}
				}
				return true
			})
			if o, _ := second.World().Get(id); string(o.Properties.Value("by")) != `"first"` {
				t.Fatalf("the second client holds %s, want the first's properties", o.Properties.Value("by"))
			}
			if v := legacy.Violations(); len(v) > 0 {
				t.Fatalf("the 2016-style peer was sent what would crash it: %v", v)
			}
			for _, m := range legacy.Messages() {
				if strings.Contains(string(m.Data), `"transfer"`) {
					t.Fatalf("the 2016-style peer was sent a transfer: %s", m.Data)
				}
			}
		})
	}
}

// TestCreatedTwiceAcrossMesh: clients of two mesh members create an object
// with one id before either member hears of the other's. Each member
// first keeps its own client's; both end with the same one, the greater
// owner's (as of equal epochs in transfers), and so do both clients.
func TestCreatedTwiceAcrossMesh(t *testing.T) {
	nodes := startMeshWith(t, 2, cluster.Options{}, relay.Options{Tick: 300 * time.Millisecond})
	a, b := dialClient(t, nodes[0].url, "a"), dialClient(t, nodes[1].url, "b")
	const id = "ball"
	for _, c := range []*client.Client{a, b} {
		if err := c.CreateWithID(id, map[string]any{"by": c.Identifier()}); err != nil {
			t.Fatal(err)
		}
	}
	winner := max(a.Identifier(), b.Identifier())
	ownerIs(t, id, winner, nodes[0].node.World(), nodes[1].node.World(), a.World(), b.World())
	waitFor(t, "every world is its node's", 5*time.Second, func() bool {
		return worldDiff(nodes[1].node.World(), nodes[0].node.World()) == "" &&
			worldDiff(a.World(), nodes[0].node.World()) == "" && worldDiff(b.World(), nodes[1].node.World()) == ""
	})
	if o, _ := a.World().Get(id); string(o.Properties.Value("by")) != `"`+winner+`"` {
		t.Fatalf("the object holds %s, want the winner's properties", o.Properties.Value("by"))
	}
}

// TestMeshMemberIdentifierForm: a mesh link whose member presents an
// identifier no node makes (New refuses them) is closed with 1008 and
// claims nothing; a well-formed one is served.
func TestMeshMemberIdentifierForm(t *testing.T) {
	n, _ := startNode(t, relay.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := peer.Accept(w, r, peer.AcceptOptions{})
		if err != nil {
			return
		}
		n.AcceptMesh(conn, "member")
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"bot-AAAAAAAA-BBBBBBBB/../x", false},
		{"server-AAAAAAAA-BBBB", false},
		{"server-", false},
		{strings.Repeat("s", 120) + "-AAAAAAAA-BBBBBBBB", false},
		{"server-AAAAAAAA-BBBBBBBB", true},
	} {
		p := wiretest.Dial(t, wiretest.WSURL(srv), tc.id, wiretest.Options{Owned: []map[string]any{{"type": "add", "id": "o-" + tc.id, "owner": tc.id}}})
		if !tc.want {
			if code, _ := p.WaitClosed(5 * time.Second); code != websocket.StatusPolicyViolation {
				t.Fatalf("%q: closed with %v, want 1008", tc.id, code)
			}
			if _, ok := n.World().Get("o-" + tc.id); ok {
				t.Fatalf("%q: its object was taken", tc.id)
			}
			continue
		}
		waitFor(t, "the member's object", 5*time.Second, func() bool { _, ok := n.World().Get("o-" + tc.id); return ok })
	}
}
