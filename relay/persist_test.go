package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/store"
)

// TestPersistRestart: a node with a store keeps its identifier, the
// persistent objects that fell to it (owner and epoch) and its own
// objects across a restart, forgets other objects, and holds a departed
// client's persistent objects for it: the client reconnects with its
// resume token and still owns them; one that does not come back loses
// them to the node once the grace is over.
// bolt returns a function that opens the store in a test's directory.
func bolt(t *testing.T) func() store.Store {
	dir := t.TempDir()
	return func() store.Store {
		s, err := store.OpenBolt(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestPersistRestart(t *testing.T) {
	open := bolt(t)
	s := open()
	srv, url := startNode(t, relay.Options{Tick: 2 * time.Millisecond, Store: s, ReclaimGrace: 300 * time.Millisecond})
	alice, bob := dialClient(t, url, "alice"), dialClient(t, url, "bob")
	door, _ := alice.Create(map[string]any{"kind": "door", "persistent": true, "open": true})
	toy, _ := alice.Create(map[string]any{"kind": "toy"})
	lamp, _ := bob.Create(map[string]any{"kind": "lamp", "persistent": true, "on": true})
	waitFor(t, "bob sees the door", 5*time.Second, func() bool { _, ok := bob.World().Get(door); return ok })
	alice.Close()
	ownerIs(t, door, srv.Identifier(), srv.World(), bob.World())
	bob.Set(lamp, map[string]any{"on": false})
	waitFor(t, "the lamp is off", 5*time.Second, func() bool {
		o, _ := srv.World().Get(lamp)
		return string(o.Properties.Value("on")) == "false"
	})
	id := srv.Identifier()
	wantDoor, _ := srv.World().Get(door)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The same data directory, a new node.
	s2 := open()
	t.Cleanup(func() { s2.Close() }) // after the node's own cleanup
	srv2, url2 := startNode(t, relay.Options{Tick: 2 * time.Millisecond, Store: s2, ReclaimGrace: 300 * time.Millisecond})
	if srv2.Identifier() != id {
		t.Fatalf("identifier %s after the restart, was %s", srv2.Identifier(), id)
	}
	got, ok := srv2.World().Get(door)
	if !ok || got.Owner != id || got.Epoch != wantDoor.Epoch || string(got.Properties.Value("open")) != "true" {
		t.Fatalf("door after the restart: %+v, want owner %s epoch %d", got, id, wantDoor.Epoch)
	}
	if _, ok := srv2.World().Get(toy); ok {
		t.Fatal("the toy (neither persistent nor the node's) survived")
	}
	if o, ok := srv2.World().Get(lamp); !ok || o.Owner != bob.Identifier() || string(o.Properties.Value("on")) != "false" {
		t.Fatalf("bob's lamp after the restart: %+v", o)
	}
	carol := dialClient(t, url2, "carol")
	waitFor(t, "carol sees the door", 5*time.Second, func() bool { _, ok := carol.World().Get(door); return ok })
	if err := carol.TakeOwnership(ctx, door); err != nil {
		t.Fatalf("take the restored door: %v", err)
	}
	// Nobody comes back for bob's lamp: it falls to the node.
	ownerIs(t, lamp, id, srv2.World(), carol.World())
}
