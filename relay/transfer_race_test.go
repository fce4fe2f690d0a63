package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// race is a topology for concurrent transfer requests: every node and Go
// client in it must end each race agreeing on one owner and epoch, the
// 2016-style observers on the owner, and each asker's answer must match
// the outcome.
type race struct {
	owner     *client.Client
	askers    []*client.Client
	observers []*client.Client
	nodes     []*relay.Node
	legacy    []*wiretest.Peer
}

// lostLog records, per client, the objects it was told it lost.
type lostLog struct {
	mu   sync.Mutex
	lost map[string]map[string]int // client -> object -> times lost
}

func (l *lostLog) watch(c *client.Client) {
	c.Subscribe(func(e client.Event) {
		if !e.Lost {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.lost == nil {
			l.lost = map[string]map[string]int{}
		}
		if l.lost[c.Identifier()] == nil {
			l.lost[c.Identifier()] = map[string]int{}
		}
		l.lost[c.Identifier()][e.ID]++
	})
}

func (l *lostLog) times(c *client.Client, id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[c.Identifier()][id]
}

// run races the askers for a fresh object, rounds times.
func (r race) run(t *testing.T, rounds int) {
	t.Helper()
	var lost lostLog
	for _, c := range r.askers {
		lost.watch(c)
	}
	var worlds []*gameworld.World
	var names []string
	for _, n := range r.nodes {
		worlds, names = append(worlds, n.World()), append(names, n.Identifier())
	}
	for _, c := range append(append([]*client.Client{r.owner}, r.askers...), r.observers...) {
		worlds, names = append(worlds, c.World()), append(names, c.Identifier())
	}
	for round := range rounds {
		ball, err := r.owner.Create(map[string]any{"transferable": true, "round": round})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "everyone sees the ball", 10*time.Second, func() bool {
			for _, w := range worlds {
				if _, ok := w.Get(ball); !ok {
					return false
				}
			}
			for _, p := range r.legacy {
				if _, ok := p.Objects()[ball]; !ok {
					return false
				}
			}
			return true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs := make([]error, len(r.askers))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range r.askers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = c.TakeOwnership(ctx, ball)
			}()
		}
		close(start)
		wg.Wait()
		cancel()

		var final gameworld.Object
		deadline := time.Now().Add(10 * time.Second)
		for {
			final, _ = worlds[0].Get(ball)
			var differ []string
			for i, w := range worlds[1:] {
				if o, _ := w.Get(ball); o.Owner != final.Owner || o.Epoch != final.Epoch {
					differ = append(differ, fmt.Sprintf("%s has %s@%d", names[i+1], o.Owner, o.Epoch))
				}
			}
			for _, p := range r.legacy {
				if o := p.Objects()[ball]; o.Owner != final.Owner {
					differ = append(differ, fmt.Sprintf("2016 peer %s has %s", p.ID, o.Owner))
				}
			}
			if len(differ) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %s has %s@%d, but %s", round, names[0], final.Owner, final.Epoch, strings.Join(differ, "; "))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if final.Epoch < 1 || int(final.Epoch) > len(r.askers) {
			t.Fatalf("round %d: owner %s at epoch %d after %d requests", round, final.Owner, final.Epoch, len(r.askers))
		}
		// Each asker's answer matches the outcome: the owner was told
		// yes; any other asker told yes was granted before the winner and
		// has since been told it lost the ball.
		winner := -1
		for i, c := range r.askers {
			if c.Identifier() == final.Owner {
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: %s owns the ball, none of the askers", round, final.Owner)
		}
		if errs[winner] != nil {
			t.Fatalf("round %d: the owner %s was told %v", round, final.Owner, errs[winner])
		}
		for i, c := range r.askers {
			switch {
			case i == winner:
			case errs[i] == nil:
				waitFor(t, c.Identifier()+", granted first, hears it lost the ball", 5*time.Second, func() bool { return lost.times(c, ball) > 0 })
			case !errors.Is(errs[i], relay.ErrTransferRefused):
				t.Fatalf("round %d: %s was told %v", round, c.Identifier(), errs[i])
			}
		}
	}
	for _, p := range r.legacy {
		if v := p.Violations(); len(v) > 0 {
			t.Fatalf("2016 peer %s saw: %v", p.ID, v)
		}
		for _, m := range p.Messages() {
			if strings.Contains(string(m.Data), `"transfer"`) || strings.Contains(string(m.Data), `"answer"`) {
				t.Fatalf("2016 peer %s was sent %s", p.ID, m.Data)
			}
			switch m.Type {
			case "worldChange", "requestMetadata", "requestRefresh", "metadata", "metadataChange":
			default:
				t.Fatalf("2016 peer %s was sent a message of type %q", p.ID, m.Type)
			}
		}
	}
}

// TestTransferRacesOnProxyChain: a server and two proxies chained below
// it; askers on each level race for objects owned at the top. Only the
// server decides, so the proxies never disagree with it.
func TestTransferRacesOnProxyChain(t *testing.T) {
	opts := relay.Options{Tick: 2 * time.Millisecond}
	srv, url := startNode(t, opts)
	p1, url1 := startProxy(t, url, opts)
	p2, url2 := startProxy(t, url1, opts)
	waitFor(t, "the chain", 5*time.Second, func() bool { return upstreamConnected(p1) && upstreamConnected(p2) })
	owner := dialClient(t, url, "owner")
	x, y, z := dialClient(t, url, "ex"), dialClient(t, url1, "why"), dialClient(t, url2, "zed")
	watcher := dialClient(t, url1, "watcher")
	legacyTop := wiretest.Dial(t, url, "legacy-TOP00000-TOP00000", wiretest.Options{})
	legacyBottom := wiretest.Dial(t, url2, "legacy-BOTTOM00-BOTTOM00", wiretest.Options{})
	nodes := []*relay.Node{srv, p1, p2}
	legacy := []*wiretest.Peer{legacyTop, legacyBottom}
	t.Run("two askers", func(t *testing.T) {
		race{owner: owner, askers: []*client.Client{x, z}, observers: []*client.Client{y, watcher}, nodes: nodes, legacy: legacy}.run(t, 20)
	})
	t.Run("three askers", func(t *testing.T) {
		race{owner: owner, askers: []*client.Client{x, y, z}, observers: []*client.Client{watcher}, nodes: nodes, legacy: legacy}.run(t, 20)
	})
	t.Run("two askers on one proxy", func(t *testing.T) {
		w := dialClient(t, url2, "dub")
		race{owner: owner, askers: []*client.Client{z, w}, observers: []*client.Client{x, y, watcher}, nodes: nodes, legacy: legacy}.run(t, 20)
	})
}

// TestTransferRacesOnMesh: a mesh of three servers, a proxy under one of
// them; askers on different nodes race for objects. Every node grants on
// its own, the greater claim wins everywhere, and each server answers its
// asker only once its members have acknowledged the grant, so the answer
// is the outcome.
func TestTransferRacesOnMesh(t *testing.T) {
	nodes := startMeshWith(t, 3, cluster.Options{}, relay.Options{Tick: 5 * time.Millisecond})
	p, purl := startProxy(t, nodes[2].url, relay.Options{Tick: 2 * time.Millisecond})
	waitFor(t, "the proxy's upstream", 5*time.Second, func() bool { return upstreamConnected(p) })
	owner := dialClient(t, nodes[0].url, "owner")
	a, b, c := dialClient(t, nodes[0].url, "aye"), dialClient(t, nodes[1].url, "bee"), dialClient(t, purl, "cee")
	watcher := dialClient(t, nodes[2].url, "watcher")
	legacy := []*wiretest.Peer{
		wiretest.Dial(t, nodes[1].url, "legacy-MESH0000-MESH0000", wiretest.Options{}),
		wiretest.Dial(t, purl, "legacy-PROXY000-PROXY000", wiretest.Options{}),
	}
	all := []*relay.Node{nodes[0].node, nodes[1].node, nodes[2].node, p}
	t.Run("two askers", func(t *testing.T) {
		race{owner: owner, askers: []*client.Client{a, b}, observers: []*client.Client{c, watcher}, nodes: all, legacy: legacy}.run(t, 20)
	})
	t.Run("three askers", func(t *testing.T) {
		race{owner: owner, askers: []*client.Client{a, b, c}, observers: []*client.Client{watcher}, nodes: all, legacy: legacy}.run(t, 20)
	})
}
