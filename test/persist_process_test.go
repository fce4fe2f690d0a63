package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/bridge/snapshot"
	"github.com/solipsism/mesh/client"
)

// objectOf returns one object of a node process's world.
func objectOf(t testing.TB, p *proc, id string) (api.ObjectInfo, bool) {
	t.Helper()
	for _, o := range stateOf(t, p).Objects {
		if o.ID == id {
			return o, true
		}
	}
	return api.ObjectInfo{}, false
}

// TestRestartKeepsTheWorld: a persistent object falls to the node when
// its owner leaves; the node is stopped (SIGTERM, or kill -9 a few ticks
// later) and started again on the same data directory: it has the same
// identifier, the object is back with its owner (the node), epoch and
// properties, and another client can take it. Alloverse clients see
// revisions that keep increasing across the restarts.
func TestRestartKeepsTheWorld(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "SIGTERM", true: "kill -9"}[kill], func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--data-dir", dir, "--tick", "10ms", "--reclaim-grace", "0"}
			p := startProc(t, args...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			alice := dialNode(t, ctx, p.URL(), "alice")
			door, _ := alice.Create(map[string]any{"kind": "door", "persistent": true, "open": true})
			alice.Create(map[string]any{"kind": "toy"})
			id := stateOf(t, p).Identifier
			waitUntil(t, "the node has the door", 5*time.Second, func() bool { _, ok := objectOf(t, p, door); return ok })
			alice.Close()
			waitUntil(t, "the door falls to the node", 5*time.Second, func() bool {
				o, ok := objectOf(t, p, door)
				return ok && o.Owner == id
			})
			before, _ := objectOf(t, p, door)
			allo, err := alloverse.DialClient(ctx, "ws://"+p.Addr+"/alloverse", alloverse.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "an Alloverse document", 5*time.Second, func() bool { _, _, ok := allo.Document(); return ok })
			_, rev1, _ := allo.Document()
			allo.Close()

			if kill {
				time.Sleep(200 * time.Millisecond) // well over a tick
				p.Kill()
			} else {
				p.Stop(t)
			}
			p2 := startProc(t, args...)
			st := stateOf(t, p2)
			if st.Identifier != id {
				t.Fatalf("identifier %s after the restart, was %s", st.Identifier, id)
			}
			if len(st.Objects) != 1 {
				t.Fatalf("after the restart the node has %+v, want only the door", st.Objects)
			}
			got := st.Objects[0]
			if got.ID != door || got.Owner != id || got.Epoch != before.Epoch || got.Epoch == 0 || string(got.Properties.Value("open")) != "true" {
				t.Fatalf("door after the restart: %+v, want %+v", got, before)
			}
			allo2, err := alloverse.DialClient(ctx, "ws://"+p2.Addr+"/alloverse", alloverse.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer allo2.Close()
			waitUntil(t, "an Alloverse document", 5*time.Second, func() bool { _, _, ok := allo2.Document(); return ok })
			if _, rev2, _ := allo2.Document(); rev2 <= rev1 {
				t.Fatalf("Alloverse revision %d after the restart, %d before", rev2, rev1)
			}
			carol := dialNode(t, ctx, p2.URL(), "carol")
			waitUntil(t, "carol sees the door", 5*time.Second, func() bool { _, ok := carol.World().Get(door); return ok })
			if err := carol.TakeOwnership(ctx, door); err != nil {
				t.Fatalf("take the restored door: %v", err)
			}
			if o, _ := objectOf(t, p2, door); o.Owner != carol.Identifier() || o.Epoch != before.Epoch+1 {
				t.Fatalf("after the take: %+v", o)
			}
		})
	}
}

// TestBadDataFile: a data file that is not a store (garbage, or a bbolt
// file of another program) stops the node at start with a message that
// names the file and how to recover, and leaves the file as it was.
func TestBadDataFile(t *testing.T) {
	tests := []struct {
		name  string
		write func(path string) error
	}{
		{"garbage", func(path string) error {
			return os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600)
		}},
		{"another program's bbolt file", func(path string) error {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("accounts"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k"), []byte("v"))
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "world.db")
			if err := tt.write(path); err != nil {
				t.Fatal(err)
			}
			was, _ := os.ReadFile(path)
			out, err := runBinary(nodeBinary(t), []string{"--data-dir", dir, "--listen", "127.0.0.1:0"}, nil)
			if err == nil {
				t.Fatalf("the node started on a bad data file:\n%s", out)
			}
			for _, want := range []string{path, "move " + path + " away", "import"} {
				if !strings.Contains(out, want) {
					t.Fatalf("the message lacks %q:\n%s", want, out)
				}
			}
			if now, _ := os.ReadFile(path); string(now) != string(was) {
				t.Fatal("the bad file was changed")
			}
		})
	}
}

// TestExportImport: export writes a node's store as JSON; import puts it
// into a new data directory, where a node starts with the same identifier
// and objects; a malformed backup is refused and changes nothing.
func TestExportImport(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, "--data-dir", dir, "--tick", "10ms", "--reclaim-grace", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialNode(t, ctx, p.URL(), "maker")
	var ids []string
	for i := range 5 {
		id, _ := c.Create(map[string]any{"persistent": true, "i": i})
		ids = append(ids, id)
	}
	id := stateOf(t, p).Identifier
	waitUntil(t, "the node has the objects", 5*time.Second, func() bool { return len(stateOf(t, p).Objects) == 5 })
	c.Close()
	waitUntil(t, "the objects fall to the node", 5*time.Second, func() bool {
		st := stateOf(t, p)
		for _, o := range st.Objects {
			if o.Owner != id {
				return false
			}
		}
		return len(st.Objects) == 5
	})
	p.Stop(t)
	bin := nodeBinary(t)
	backup := filepath.Join(t.TempDir(), "world.json")
	if out, err := runBinary(bin, []string{"export", "--data-dir", dir, "--file", backup}, nil); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(backup)
	var doc struct {
		Format     string `json:"format"`
		Version    int    `json:"version"`
		Identifier string `json:"identifier"`
		Objects    []struct {
			ID, Owner string
			Epoch     uint64
		} `json:"objects"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Format != "solipsism-world" || doc.Version != 1 || doc.Identifier != id || len(doc.Objects) != 5 {
		t.Fatalf("backup %s: %v", b, err)
	}
	if strings.Contains(string(b), "secret") {
		t.Fatal("the backup holds the resume secret")
	}

	dir2 := t.TempDir()
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":""}]}`), 0o600)
	if out, err := runBinary(bin, []string{"import", "--data-dir", dir2, "--file", bad}, nil); err == nil || !strings.Contains(out, "no owner") {
		t.Fatalf("a bad backup: %v\n%s", err, out)
	}
	// With property schemas the backup's objects break, nothing is imported.
	strict := filepath.Join(t.TempDir(), "schemas.json")
	os.WriteFile(strict, []byte(`{"default":{"type":"object","required":["color"]}}`), 0o600)
	if out, err := runBinary(bin, []string{"import", "--data-dir", dir2, "--file", backup, "--schemas", strict}, nil); err == nil || !strings.Contains(out, "break the property schemas") || !strings.Contains(out, "color") {
		t.Fatalf("an import that breaks the schemas: %v\n%s", err, out)
	}
	if out, err := runBinary(bin, []string{"import", "--data-dir", dir2, "--file", backup, "--schemas", "../docs/demo-schemas.json"}, nil); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if out, err := runBinary(bin, []string{"import", "--data-dir", dir2, "--file", backup}, nil); err == nil || !strings.Contains(out, "--replace") {
		t.Fatalf("a second import without --replace: %v\n%s", err, out)
	}
	p2 := startProc(t, "--data-dir", dir2)
	st := stateOf(t, p2)
	if st.Identifier != id || len(st.Objects) != 5 {
		t.Fatalf("node on the imported store: %s with %d objects", st.Identifier, len(st.Objects))
	}
	got := map[string]bool{}
	for _, o := range st.Objects {
		got[o.ID] = o.Owner == id && o.Epoch == 1
	}
	for _, want := range ids {
		if !got[want] {
			t.Fatalf("object %s missing or changed after import: %+v", want, st.Objects)
		}
	}
}

// TestMeshRestartConverges: a mesh of three node processes, each with a
// store. A persistent object falls to node A; while A is down, a client
// of B takes it (the next epoch). A restarts with its stored copy (the
// older epoch), and every node ends with B's client as owner at the newer
// epoch; an object only A held comes back to all three.
func TestMeshRestartConverges(t *testing.T) {
	secret := strings.Repeat("ef", 32)
	common := []string{"--mesh-bind", "127.0.0.1:0", "--mesh-secret", secret, "--mesh-label", "persist", "--mesh-profile", "local", "--tick", "10ms", "--reclaim-grace", "0"}
	dirA := t.TempDir()
	a := startProc(t, append([]string{"--data-dir", dirA}, common...)...)
	seed := meshAddr(t, a)
	b := startProc(t, append(common, "--join", seed)...)
	seedB := meshAddr(t, b)
	c := startProc(t, append(common, "--join", seed)...)
	waitMesh(t, []*proc{a, b, c})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	maker := dialNode(t, ctx, a.URL(), "maker")
	ball, _ := maker.Create(map[string]any{"persistent": true, "kind": "ball"})
	lamp, _ := maker.Create(map[string]any{"persistent": true, "kind": "lamp"})
	idA := stateOf(t, a).Identifier
	waitUntil(t, "A has the objects", 5*time.Second, func() bool { return len(stateOf(t, a).Objects) == 2 })
	maker.Close()
	for _, p := range []*proc{a, b, c} {
		waitUntil(t, "the ball and lamp fall to A everywhere", 10*time.Second, func() bool {
			o1, ok1 := objectOf(t, p, ball)
			o2, ok2 := objectOf(t, p, lamp)
			return ok1 && ok2 && o1.Owner == idA && o2.Owner == idA
		})
	}
	a.Stop(t)
	taker := dialNode(t, ctx, b.URL(), "taker")
	waitUntil(t, "the taker sees the ball", 10*time.Second, func() bool { _, ok := taker.World().Get(ball); return ok })
	// The survivors may first claim A's objects (it left the mesh); the
	// taker's request then takes a later epoch still.
	if err := taker.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	want, _ := objectOf(t, b, ball)
	a2 := startProc(t, append([]string{"--data-dir", dirA}, append(common, "--join", seedB)...)...)
	if stateOf(t, a2).Identifier != idA {
		t.Fatal("A has a new identifier after the restart")
	}
	for i, p := range []*proc{a2, b, c} {
		waitUntil(t, fmt.Sprintf("node %d agrees on the ball (%s at epoch %d) and has the lamp", i, want.Owner, want.Epoch), 15*time.Second, func() bool {
			o, ok := objectOf(t, p, ball)
			_, lampOK := objectOf(t, p, lamp)
			return ok && lampOK && o.Owner == want.Owner && o.Epoch == want.Epoch
		})
	}
}

// TestReconnectAfterRestart: a client stays connected while the node
// restarts on its address and data directory. The client reconnects by
// itself, presents its resume token (the node kept the secret that signs
// it), and still owns its persistent object, past the reclaim grace.
func TestReconnectAfterRestart(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, "--data-dir", dir, "--tick", "10ms", "--reclaim-grace", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bob, err := client.Dial(ctx, p.URL(), client.Options{Prefix: "bob", Tick: 10 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	lamp, _ := bob.Create(map[string]any{"kind": "lamp", "persistent": true})
	waitUntil(t, "the node has the lamp", 5*time.Second, func() bool { _, ok := objectOf(t, p, lamp); return ok })
	time.Sleep(100 * time.Millisecond)
	p.Kill()
	p2 := startProc(t, "--data-dir", dir, "--tick", "10ms", "--reclaim-grace", "1s", "--listen", p.Addr)
	waitUntil(t, "bob reconnects", 10*time.Second, func() bool { return bob.Connected() && len(stateOf(t, p2).Links) > 0 })
	time.Sleep(1500 * time.Millisecond) // past the grace
	o, ok := objectOf(t, p2, lamp)
	if !ok || o.Owner != bob.Identifier() {
		t.Fatalf("after the restart the lamp is %+v (present %v), want bob's", o, ok)
	}
	if err := bob.Set(lamp, map[string]any{"on": true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "bob's write reaches the node", 5*time.Second, func() bool {
		o, _ := objectOf(t, p2, lamp)
		return string(o.Properties.Value("on")) == "true"
	})
}

// TestSnapshotClientResyncs: a snapshot client follows a node that is
// killed and started again on the same ports and data directory. The
// restarted node answers the client's next command with "no session";
// the client connects again and sees the restored world.
func TestSnapshotClientResyncs(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udp := pc.LocalAddr().String()
	pc.Close()
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--tick", "10ms", "--reclaim-grace", "0", "--snapshot-listen", udp}
	p := startProc(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maker := dialNode(t, ctx, p.URL(), "maker")
	statue, _ := maker.Create(map[string]any{"persistent": true, "kind": "statue"})
	waitUntil(t, "the node has the statue", 5*time.Second, func() bool { _, ok := objectOf(t, p, statue); return ok })
	maker.Close()
	sc, err := snapshot.Dial(ctx, udp, snapshot.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	waitUntil(t, "the snapshot client sees the statue", 5*time.Second, func() bool { _, ok := sc.Objects()[statue]; return ok })
	first := sc.Identifier()
	time.Sleep(100 * time.Millisecond)
	p.Kill()
	p2 := startProc(t, append(args, "--listen", p.Addr)...)
	waitUntil(t, "the client resynchronises", 10*time.Second, func() bool {
		if err := sc.Err(); err != nil {
			t.Fatalf("the snapshot client stopped: %v", err)
		}
		return sc.Resyncs() > 0
	})
	waitUntil(t, "the client sees the restored statue", 5*time.Second, func() bool { _, ok := sc.Objects()[statue]; return ok })
	if sc.Identifier() == first || sc.Err() != nil {
		t.Fatalf("after the resync: identifier %s (was %s), err %v", sc.Identifier(), first, sc.Err())
	}
	if _, ok := objectOf(t, p2, statue); !ok {
		t.Fatal("the node lost the statue")
	}
}
