package test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// TestMeshRollingRestart: three members, each with a data directory of
// its own, two 2016 clients on each (they announce themselves without
// waiting to be asked); each client owns 3 persistent and 3 plain objects
// and bumps a counter on all six every 200 ms. Each member in turn gets
// SIGTERM and starts again with the same flags and data directory (joining
// the other two), 8 s apart; the clients of a stopped member reconnect to
// another one at once. 5 s after the moving stops, every member holds the
// same world, with every client's last values, and every client's world
// equals its node's; no client was ever sent a change of its own object,
// nor saw another writer's object go out of its view.
// A persistent object whose client left before, and a ball a client
// released (both member 0's own, the ball kept by no store), are on every
// member at the end, with their values, owned by one of them.
func TestMeshRollingRestart(t *testing.T) {
	secret := strings.Repeat("ab", 32)
	common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "rolling", "--mesh-profile", "local"}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var mu sync.Mutex // guards members
	members := make([]*proc, 3)
	members[0] = startProc(t, append([]string{"--data-dir", dirs[0]}, common...)...)
	for i := 1; i < 3; i++ {
		members[i] = startProc(t, append([]string{"--data-dir", dirs[i], "--join", meshAddr(t, members[0])}, common...)...)
	}
	waitMesh(t, members)
	member := func(i int) *proc {
		mu.Lock()
		defer mu.Unlock()
		return members[i]
	}

	type client struct {
		mu   sync.Mutex
		peer *wiretest.Peer
		at   int // index of its member
		ids  []string
	}
	clients := make([]*client, 6)
	for i := range clients {
		c := &client{at: i / 2}
		id := fmt.Sprintf("client-%08d-rolling0", i)
		var adds []map[string]any
		for k := range 6 {
			oid := fmt.Sprintf("o%d-%d", i, k)
			c.ids = append(c.ids, oid)
			adds = append(adds, wiretest.Add(oid, id, map[string]any{"n": 0, "persistent": k < 3}))
		}
		c.peer = wiretest.Dial(t, member(c.at).URL(), id, wiretest.Options{Eager: true, Forget: true})
		c.peer.Change(adds...)
		clients[i] = c
	}
	// A persistent object whose client left: it falls to member 0, whose
	// restart must not lose it (its owner leaves the mesh on purpose).
	leaver := wiretest.Dial(t, member(0).URL(), "client-leaver00-rolling0", wiretest.Options{Eager: true})
	leaver.Change(wiretest.Add("fallen", "client-leaver00-rolling0", map[string]any{"n": 7, "persistent": true}))
	waitUntil(t, "the leaver's object at member 0", 10*time.Second, func() bool { _, ok := worldOf(t, member(0))["fallen"]; return ok })
	leaver.Close()
	// And a ball a Go client released to member 0: not persistent, so
	// kept by no store; member 0 hands it over when it leaves.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	releaser := dialNode(t, ctx, member(0).URL(), "releaser")
	if err := releaser.CreateWithID("ball", map[string]any{"n": 3, "transferable": true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the ball at member 0", 10*time.Second, func() bool { _, ok := worldOf(t, member(0))["ball"]; return ok })
	if err := releaser.Release(ctx, "ball"); err != nil {
		t.Fatal(err)
	}
	releaser.Close()
	id0 := meshHealth(t, member(0)).Identifier
	waitUntil(t, "the left object to fall to member 0 everywhere", 10*time.Second, func() bool {
		for i := range 3 {
			w := worldOf(t, member(i))
			if o, ok := w["fallen"]; !ok || o.Owner != id0 {
				return false
			}
			if o, ok := w["ball"]; !ok || o.Owner != id0 {
				return false
			}
		}
		return true
	})
	// The writers: every 200 ms a client bumps n on its six objects; one
	// whose connection closed connects to the next member at once, as
	// itself, offering its objects.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var violations []string
	blinks := map[string]int{} // removes the clients were sent, by object
	var vmu sync.Mutex
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				c.mu.Lock()
				if c.peer.Closed() != nil {
					vmu.Lock()
					violations = append(violations, c.peer.Violations()...)
					for id, n := range c.peer.Removes() {
						blinks[id] += n
					}
					vmu.Unlock()
					next := (c.at + 1) % 3
					p, err := wiretest.TryDial(t, member(next).URL(), c.peer.ID, wiretest.Options{Eager: true, Forget: true, Owned: c.peer.Owned()})
					if err == nil {
						c.peer, c.at = p, next
					}
				}
				var ups []map[string]any
				for _, oid := range c.ids {
					ups = append(ups, wiretest.Update(oid, c.peer.ID, map[string]any{"n": n}))
				}
				c.peer.TryChange(ups...) // a closed one reconnects at the next tick
				c.mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	for i := range 3 {
		old := member(i)
		old.Stop(t)
		peers := []string{}
		for j := range 3 {
			if j != i {
				peers = append(peers, meshAddr(t, member(j)))
			}
		}
		next := startProc(t, append([]string{"--data-dir", dirs[i], "--join", strings.Join(peers, ",")}, common...)...)
		mu.Lock()
		members[i] = next
		mu.Unlock()
		time.Sleep(8 * time.Second)
	}
	close(stop)
	wg.Wait()
	time.Sleep(5 * time.Second)

	// Every client's last values, on every member.
	want := map[string]string{}
	for _, c := range clients {
		for _, o := range c.peer.Owned() {
			want[o["id"].(string)] = c.peer.ID + " " + string(o["properties"].(map[string]any)["n"].(json.RawMessage))
		}
	}
	var bad []string
	for i := range 3 {
		w := worldOf(t, member(i))
		for id, v := range want {
			o, ok := w[id]
			got := "missing"
			if ok {
				got = o.Owner + " " + string(o.Properties["n"])
			}
			if got != v {
				bad = append(bad, fmt.Sprintf("member %d: %s is %s, want %s", i, id, got, v))
			}
		}
	}
	for id, n := range map[string]string{"fallen": "7", "ball": "3"} {
		owner := ""
		for i := range 3 {
			o, ok := worldOf(t, member(i))[id]
			switch {
			case !ok || string(o.Properties["n"]) != n:
				bad = append(bad, fmt.Sprintf("member %d: the node-owned %s is %v %s", i, id, ok, o.Properties["n"]))
			case owner != "" && o.Owner != owner:
				bad = append(bad, fmt.Sprintf("member %d: %s is %s's, another member's %s", i, id, o.Owner, owner))
			case !strings.HasPrefix(o.Owner, "server-"):
				bad = append(bad, fmt.Sprintf("member %d: %s is %s's", i, id, o.Owner))
			}
			owner = o.Owner
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d object-member pairs of %d differ 5 s after the moving stopped:\n%s", len(bad), 3*len(want), strings.Join(bad, "\n"))
	}
	var peers []peerAt
	for _, c := range clients {
		peers = append(peers, peerAt{c.peer, member(c.at)})
		violations = append(violations, c.peer.Violations()...)
		for id, n := range c.peer.Removes() {
			blinks[id] += n
		}
	}
	// The writers' objects belong to clients that never left: none may
	// ever go out of anyone's view. (The node-owned ones change owner as
	// members stop, which a 2016 client is told as a remove and an add.)
	for id := range blinks {
		if id == "fallen" || id == "ball" {
			delete(blinks, id)
		}
	}
	if len(blinks) > 0 {
		t.Errorf("clients saw objects of peers still connected go (a blink), by object: %v", blinks)
	}
	if len(violations) > 0 {
		t.Errorf("clients were sent what a 2016 client must never get:\n%s", strings.Join(violations, "\n"))
	}
	if d := divergent(t, peers); len(d) > 0 {
		t.Errorf("%d clients differ from their node:\n%s", len(d), strings.Join(d, "\n"))
	}
}
