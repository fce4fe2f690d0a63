package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/solipsism/mesh/internal/wiretest"
)

var (
	csharpOnce  sync.Once
	csharpDir   string
	csharpBuild error
)

// csharpTests builds the C# snapshot library (clients/csharp) and its
// test program with Mono's compiler, once per test binary, and returns
// the directory holding Tests.exe.
func csharpTests(t testing.TB) string {
	mcs := toolPath(t, "Mono's C# compiler", "mono-devel", "mcs")
	csharpOnce.Do(func() {
		dir, err := os.MkdirTemp("", "solipsism-csharp-")
		if err != nil {
			csharpBuild = err
			return
		}
		csharpDir = dir
		src, _ := filepath.Glob("../clients/csharp/src/*.cs")
		lib := filepath.Join(dir, "Solipsism.Snapshot.dll")
		for _, args := range [][]string{
			append([]string{"-langversion:7.2", "-target:library", "-warnaserror+", "-out:" + lib}, src...),
			{"-langversion:7.2", "-out:" + filepath.Join(dir, "Tests.exe"), "-r:" + lib, "../clients/csharp/tests/Tests.cs"},
		} {
			if out, err := exec.Command(mcs, args...).CombinedOutput(); err != nil {
				csharpBuild = &buildError{err, string(out)}
				return
			}
		}
	})
	if csharpBuild != nil {
		t.Fatal(csharpBuild)
	}
	return csharpDir
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "mcs: " + e.err.Error() + "\n" + e.out }

func runCSharp(t *testing.T, args ...string) string {
	dir := csharpTests(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mono", append([]string{filepath.Join(dir, "Tests.exe")}, args...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("mono Tests.exe %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestCSharpVectors: the C# library decodes docs/bridges.md's vectors
// bit for bit (the packed code, the types' GUIDs, hashes and digest, the
// handshake's accept, three snapshots to a new client).
func TestCSharpVectors(t *testing.T) {
	runCSharp(t, "vectors", "../docs/bridges.md")
}

// TestCSharpFuzz: mutated and random packets make the C# decoder throw
// BadPacketException or apply; nothing else escapes.
func TestCSharpFuzz(t *testing.T) {
	t.Log(runCSharp(t, "fuzz", "../docs/bridges.md", "20000"))
}

// startCSharpClient runs Tests.exe live: a C# snapshot client driven
// over stdin.
func startCSharpClient(t *testing.T, udp string) *lineProc {
	host, port, _ := strings.Cut(udp, ":")
	return startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "live", host, port)
}

// TestCSharpClient: a C# snapshot client and a Go WebSocket client on one
// node see each other's objects appear, move and vanish; the C# client's
// whole world equals the node's; after the node restarts on the same
// ports, the C# client connects again by itself and follows the world.
func TestCSharpClient(t *testing.T) {
	udp := freeUDPAddr(t)
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--tick", "20ms", "--reclaim-grace", "0", "--snapshot-listen", udp}
	p := startProc(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	cs := startCSharpClient(t, udp)
	ident := cs.expect(t, "CONNECTED ", 30*time.Second)

	// The Go client's ball spawns for C#, then moves.
	ball, err := goc.Create(map[string]any{"ghostType": "transform", "position": []float64{1, 2, 3}, "rotation": []float64{0, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.expect(t, "SPAWN "+ball+" ", 10*time.Second); got != `{"ghostType":"transform","position":[1,2,3],"rotation":[0,0,0,1]}` {
		t.Fatalf("C# spawned the ball as %s", got)
	}
	for x := 2; x <= 5; x++ {
		time.Sleep(40 * time.Millisecond)
		if err := goc.Set(ball, map[string]any{"position": []float64{float64(x), 2, 3}}); err != nil {
			t.Fatal(err)
		}
	}
	for last := ""; last != `{"ghostType":"transform","position":[5,2,3],"rotation":[0,0,0,1]}`; {
		last = cs.expect(t, "CHANGE "+ball+" ", 10*time.Second)
	}

	// C#'s crate appears for the Go client, owned by C#'s identifier.
	cs.send(t, `SET crate-1 {"ghostType":"transform","position":[4,5,6],"rotation":[0,0,0,1]}`)
	waitUntil(t, "the Go client to see C#'s crate", 10*time.Second, func() bool {
		o, ok := goc.World().Get("crate-1")
		return ok && o.Owner == ident
	})
	cs.send(t, `SET crate-1 {"position":[7,5,6]}`)
	waitUntil(t, "the crate to move", 10*time.Second, func() bool {
		o, _ := goc.World().Get("crate-1")
		at, _ := o.Properties.Get("position")
		return string(at) == "[7,5,6]"
	})
	// (C# gets its own objects back, as the node holds them.)
	cs.expect(t, "CHANGE crate-1 "+`{"ghostType":"transform","position":[7,5,6],"rotation":[0,0,0,1]}`, 10*time.Second)

	// C#'s whole world against the node's.
	cs.send(t, "WORLD")
	if d := viewDiff(t, cs.expect(t, "WORLD ", 10*time.Second), worldOf(t, p), false); d != "" {
		t.Fatal(d)
	}

	// C# takes the ball (transferable), then gives it to the node.
	if err := goc.Set(ball, map[string]any{"transferable": true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the node to hold the ball transferable", 10*time.Second, func() bool {
		_, ok := worldOf(t, p)[ball].Properties["transferable"]
		return ok
	})
	cs.send(t, "TAKE "+ball)
	waitUntil(t, "C# to take the ball", 10*time.Second, func() bool {
		o, _ := goc.World().Get(ball)
		return o.Owner == ident
	})
	cs.send(t, "RELEASE "+ball)
	waitUntil(t, "C# to release the ball to the node", 10*time.Second, func() bool {
		o, _ := goc.World().Get(ball)
		return strings.HasPrefix(o.Owner, "server-")
	})

	// The ball goes (the node removes its own object when asked by an
	// admin; here the Go client takes it back and removes it): C#
	// despawns it.
	if err := goc.TakeOwnership(ctx, ball); err != nil {
		t.Fatal(err)
	}
	if err := goc.Remove(ball); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "DESPAWN "+ball, 10*time.Second)

	// The node restarts on the same ports: C# is told "no session" or
	// times out, connects again, and follows the world afresh.
	p.Kill()
	p2 := startProc(t, append(args, "--listen", p.Addr)...)
	cs.expect(t, "RESYNCED ", 30*time.Second)
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	goc2 := dialNode(t, ctx2, p2.URL(), "gotest2")
	again, err := goc2.Create(map[string]any{"ghostType": "transform", "position": []float64{9, 9, 9}, "rotation": []float64{0, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "SPAWN "+again+" ", 20*time.Second)
	cs.send(t, "QUIT")
	cs.expect(t, "BYE", 10*time.Second)
}

// TestCSharpUnityLayerCompiles: the Unity layer (clients/csharp/unity)
// compiles against the library and the UnityEngine declarations it uses
// (tests/UnityStub.cs: no Unity runs here, so its behaviour is not
// tested; the library under it is).
func TestCSharpUnityLayerCompiles(t *testing.T) {
	dir := csharpTests(t)
	mcs := toolPath(t, "Mono's C# compiler", "mono-devel", "mcs")
	out, err := exec.Command(mcs, "-langversion:7.2", "-target:library", "-warnaserror+", "-out:"+filepath.Join(t.TempDir(), "Unity.dll"),
		"-r:"+filepath.Join(dir, "Solipsism.Snapshot.dll"), "../clients/csharp/tests/UnityStub.cs", "../clients/csharp/unity/SolipsismSnapshotMirror.cs").CombinedOutput()
	if err != nil {
		t.Fatalf("mcs: %v\n%s", err, out)
	}
}

// BenchmarkCSharpCodec: the C# library encoding (SnapshotWriter, as a
// server would: a scan of 1,000 transform ghosts for changes, then the
// 100 that move along circles coded against the two previous ticks) and
// decoding (World) 600 snapshots: ns per changed ghost each way, bytes
// allocated per packet each way, and bits per changed ghost (the packet's
// header included), measured with Mono.
//
//	go test ./test -run '^$' -bench CSharpCodec -benchtime 1x
func BenchmarkCSharpCodec(b *testing.B) {
	dir := csharpTests(b)
	for range b.N {
		out, err := exec.Command("mono", filepath.Join(dir, "Tests.exe"), "bench").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			b.Fatalf("mono Tests.exe bench: %v\n%s", err, out)
		}
		var encNs, encAlloc, decNs, decAlloc, bits float64
		if _, err := fmt.Sscanf(string(out[strings.Index(string(out), "BENCH"):]),
			"BENCH encode-ns/changed-ghost %g encode-bytes-allocated/tick %g decode-ns/changed-ghost %g decode-bytes-allocated/tick %g bits/changed-ghost %g",
			&encNs, &encAlloc, &decNs, &decAlloc, &bits); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		b.ReportMetric(encNs, "encode-ns/changed-ghost")
		b.ReportMetric(encAlloc, "encode-allocated-bytes/packet")
		b.ReportMetric(decNs, "decode-ns/changed-ghost")
		b.ReportMetric(decAlloc, "decode-allocated-bytes/packet")
		b.ReportMetric(bits, "bits/changed-ghost")
	}
}

// TestCSharpClientUnderLoss: through a relay that loses 10% of the
// datagrams both ways, duplicates and reorders, the C# client follows 50
// objects a Go client moves, removes and adds again, and its own objects
// reach the node; once traffic stops its whole world equals the node's.
func TestCSharpClientUnderLoss(t *testing.T) {
	udp := freeUDPAddr(t)
	p := startProc(t, "--tick", "20ms", "--reclaim-grace", "0", "--snapshot-listen", udp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	cs := startCSharpClient(t, wiretest.LossyUDP(t, udp, 5))
	ident := cs.expect(t, "CONNECTED ", 30*time.Second)
	cs.send(t, "QUIET")
	const n = 50
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("ball-%02d", i)
		if err := goc.CreateWithID(ids[i], map[string]any{"ghostType": "transform", "position": []float64{float64(i), 0, 0}, "rotation": []float64{0, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 1; round <= 40; round++ {
		for i, id := range ids {
			switch {
			case round == 20 && i%5 == 0:
				goc.Remove(id)
			case round == 30 && i%10 == 0:
				goc.CreateWithID(id, map[string]any{"ghostType": "transform", "position": []float64{float64(i), 5, 0}, "rotation": []float64{0, 0, 0, 1}})
			case round < 20 || i%5 != 0 || (round > 30 && i%10 == 0):
				goc.Set(id, map[string]any{"position": []float64{float64(i), float64(round) / 100, 0}})
			}
		}
		if round%8 == 0 {
			cs.send(t, fmt.Sprintf(`SET crate-%d {"ghostType":"transform","position":[%d,1,1],"rotation":[0,0,0,1]}`, round/8, round))
		}
		time.Sleep(30 * time.Millisecond)
	}
	var diff string
	deadline := time.Now().Add(30 * time.Second)
	for converged := false; !converged; {
		if time.Now().After(deadline) {
			t.Fatalf("the C# client does not hold the node's world: %s", diff)
		}
		time.Sleep(100 * time.Millisecond)
		cs.send(t, "WORLD")
		node := worldOf(t, p)
		diff = viewDiff(t, cs.expect(t, "WORLD ", 10*time.Second), node, false)
		if diff == "" && len(node) != n-n/5+n/10+5 {
			diff = fmt.Sprintf("the node holds %d objects", len(node))
		}
		converged = diff == ""
	}
	for k := 1; k <= 5; k++ {
		if o, ok := goc.World().Get(fmt.Sprintf("crate-%d", k)); !ok || o.Owner != ident {
			t.Fatalf("the Go client lacks C#'s crate-%d (or it is not C#'s)", k)
		}
	}
}

// TestCSharpWorldClient: the C# WorldClient (the WebSocket protocol) and a
// Go client on one node: each sees the other's objects; C# takes the Go
// client's ball (a transfer), moves it, and releases it to the node; its
// connection breaks and it takes its identifier back with its resume
// token, its objects never vanishing for the Go client; its whole world
// equals the node's; when it leaves, its objects go.
func TestCSharpWorldClient(t *testing.T) {
	p := startProc(t, "--tick", "20ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	ball, err := goc.Create(map[string]any{"kind": "ball", "transferable": true, "position": []float64{0, 1, 0}})
	if err != nil {
		t.Fatal(err)
	}
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", p.URL())
	ident := cs.expect(t, "CONNECTED ", 30*time.Second)
	cs.expect(t, "ADDED "+ball+" ", 10*time.Second)

	cs.send(t, `CREATE crate-1 {"kind":"crate","position":[1,2,3]}`)
	waitUntil(t, "the Go client to see C#'s crate", 10*time.Second, func() bool {
		o, ok := goc.World().Get("crate-1")
		return ok && o.Owner == ident
	})
	if err := goc.Set(ball, map[string]any{"position": []float64{0, 2, 0}}); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "CHANGED "+ball+" "+`{"kind":"ball","position":[0,2,0],"transferable":true}`, 10*time.Second)

	// C# takes the ball, moves it, and the Go client sees both.
	cs.send(t, "TAKE "+ball)
	if got := cs.expect(t, "OWNER "+ball+" ", 10*time.Second); got != ident+" "+goc.Identifier() {
		t.Fatalf("the ball's owner changed as %q", got)
	}
	cs.send(t, "SET "+ball+` {"position":[5,1,5]}`)
	cs.expect(t, "SET-OK "+ball, 10*time.Second)
	waitUntil(t, "the Go client to see the ball taken and moved", 10*time.Second, func() bool {
		o, _ := goc.World().Get(ball)
		at, _ := o.Properties.Get("position")
		return o.Owner == ident && string(at) == "[5,1,5]"
	})

	// The connection breaks: C# dials again with its token, and its
	// objects never vanish for the Go client.
	var vanished sync.WaitGroup
	var gone atomic.Bool
	vanished.Add(1)
	stop := make(chan struct{})
	go func() {
		defer vanished.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, id := range []string{"crate-1", ball} {
				if o, ok := goc.World().Get(id); !ok || o.Owner != ident {
					gone.Store(true)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	cs.send(t, "DROP")
	cs.expect(t, "LINKUP", 10*time.Second)
	cs.send(t, `SET crate-1 {"position":[1,2,4]}`)
	waitUntil(t, "C#'s write after the reconnect", 10*time.Second, func() bool {
		o, _ := goc.World().Get("crate-1")
		at, _ := o.Properties.Get("position")
		return string(at) == "[1,2,4]"
	})
	close(stop)
	vanished.Wait()
	if gone.Load() {
		t.Fatal("C#'s objects vanished (or changed owner) for the Go client while it reconnected")
	}
	if !strings.Contains(p.Log(), "keeping its objects for the reclaim grace") {
		t.Fatalf("the node did not see a broken link:\n%s", p.Log())
	}

	// C# releases the ball to the node.
	cs.send(t, "RELEASE "+ball)
	if got := cs.expect(t, "OWNER "+ball+" ", 10*time.Second); !strings.HasPrefix(got, "server-") {
		t.Fatalf("the released ball's owner is %q", got)
	}

	// C#'s whole world against the node's.
	time.Sleep(100 * time.Millisecond)
	cs.send(t, "WORLD")
	if d := viewDiff(t, cs.expect(t, "WORLD ", 10*time.Second), worldOf(t, p), true); d != "" {
		t.Fatal(d)
	}

	// C# leaves: its crate goes; the ball, the node's, stays.
	cs.send(t, "QUIT")
	cs.expect(t, "BYE", 10*time.Second)
	waitUntil(t, "C#'s crate to go", 10*time.Second, func() bool {
		_, ok := goc.World().Get("crate-1")
		return !ok
	})
	if _, ok := goc.World().Get(ball); !ok {
		t.Fatal("the released ball went with C#")
	}
}

// TestCSharpReadmeCompiles: the C# README's examples are whole programs
// that compile as written, with the Mono commands the README gives, run
// as it says from the repository's root.
func TestCSharpReadmeCompiles(t *testing.T) {
	toolPath(t, "Mono's C# compiler", "mono-devel", "mcs")
	readme, err := os.ReadFile("../clients/csharp/README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(readme), "```")
	var build []string
	var examples []string
	for i := 1; i < len(blocks); i += 2 {
		switch {
		case strings.HasPrefix(blocks[i], "csharp\n"):
			examples = append(examples, strings.TrimPrefix(blocks[i], "csharp\n"))
		case strings.HasPrefix(blocks[i], "sh\n") && strings.Contains(blocks[i], "mcs "):
			for _, l := range strings.Split(strings.TrimPrefix(blocks[i], "sh\n"), "\n") {
				if strings.HasPrefix(l, "mcs ") {
					build = append(build, l)
				}
			}
		}
	}
	if len(examples) < 3 || len(build) != 2 {
		t.Fatalf("found %d C# examples and %d mcs commands in the README, want 3 and 2", len(examples), len(build))
	}
	// The commands run from the repository's root, in a copy of it whose
	// Example.cs is each example in turn.
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "clients", "csharp", "src"), os.DirFS("../clients/csharp/src")); err != nil {
		t.Fatal(err)
	}
	run := func(line string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	run(build[0])
	for n, code := range examples {
		if err := os.WriteFile(filepath.Join(root, "Example.cs"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", build[1])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("example %d of the C# README does not compile with %q: %v\n%s\n%s", n+1, build[1], err, out, code)
		}
	}
}

// TestCSharpWorldClientAfterRestart: an object that went while the C#
// WorldClient's node was down (it restarted without it) goes for the
// client once the refresh answer after its reconnection is complete; the
// others it holds never blink.
func TestCSharpWorldClientAfterRestart(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--tick", "20ms"}
	p := startProc(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	gone, err := goc.Create(map[string]any{"kind": "gone"})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := goc.Create(map[string]any{"kind": "kept", "persistent": true})
	if err != nil {
		t.Fatal(err)
	}
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", p.URL())
	cs.expect(t, "ADDED "+gone+" ", 30*time.Second)
	p.Stop(t) // the persistent object falls to the node and is stored; the other goes
	goc.Close()
	p2 := startProc(t, append(args, "--listen", p.Addr)...)
	if _, ok := worldOf(t, p2)[kept]; !ok {
		t.Fatal("the restarted node lacks the persistent object")
	}
	for {
		l := cs.expect(t, "", 20*time.Second)
		if strings.HasPrefix(l, "REMOVED "+kept) {
			t.Fatalf("the object the node kept blinked for C#")
		}
		if l == "REMOVED "+gone {
			break
		}
	}
	cs.send(t, "WORLD")
	if d := viewDiff(t, cs.expect(t, "WORLD ", 10*time.Second), worldOf(t, p2), true); d != "" {
		t.Fatal(d)
	}
}

// TestCSharpWorldClientNeverWaitsOnAStalledNode: a node that answers the
// handshake and then reads nothing. The C# WorldClient's Poll goes on (its
// loop answers every PING) while what it sends piles up, and once that
// passes its bound it drops the link and dials again.
func TestCSharpWorldClientNeverWaitsOnAStalledNode(t *testing.T) {
	var dials atomic.Int32
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		dials.Add(1)
		c.Write(r.Context(), websocket.MessageText, []byte(`["metadataChange",{"identifier":"server-AAAAAAAA-BBBBBBBB","role":"server"}]`))
		select { // reading nothing
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", wiretest.WSURL(srv))
	cs.expect(t, "LINKUP", 30*time.Second)
	// 64 objects of 256 KiB: more than the sockets' buffers hold.
	for i := range 64 {
		cs.send(t, fmt.Sprintf("FILL blob-%d 256", i))
		cs.send(t, fmt.Sprintf("PING %d", i))
		cs.expect(t, fmt.Sprintf("PONG %d", i), 10*time.Second)
	}
	waitUntil(t, "the client to drop the stalled link and dial again", 30*time.Second, func() bool { return dials.Load() >= 2 })
}

// TestCSharpOutdated: the C# snapshot client says its wire version in its
// connect, and reports a server's refusal of it as OutdatedException with
// the server's version (a real UDP socket answering as a server of
// version 4 would), having sent one connect only.
func TestCSharpOutdated(t *testing.T) {
	csharpTests(t)
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var mu sync.Mutex
	var connects [][]byte
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			connects = append(connects, append([]byte(nil), buf[:n]...))
			mu.Unlock()
			srv.WriteToUDP([]byte{7, 7, 4, 0}, from)
		}
	}()
	port := srv.LocalAddr().(*net.UDPAddr).Port
	out := runCSharp(t, "outdated", "127.0.0.1", strconv.Itoa(port))
	if !strings.Contains(out, "OUTDATED 4 snapshot: the node speaks wire version 4, this client 3") {
		t.Fatalf("Tests.exe outdated: %s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(connects) != 1 || len(connects[0]) != 64 || connects[0][0] != 1 || connects[0][5] != 3 || connects[0][6] != 0 {
		t.Fatalf("the C# client sent %d datagrams, first % x", len(connects), connects[0])
	}
}

// TestCSharpRefused: on a node with the demo schemas, the C# WorldClient's
// avatar (the README's) is taken; a write that breaks the schema is
// refused: the client raises Refused with the node's reason and holds the
// node's values again, and the Go client never sees the bad value.
func TestCSharpRefused(t *testing.T) {
	p := startProc(t, "--tick", "20ms", "--schemas", "../docs/demo-schemas.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	cs := startLineProc(t, nil, "mono", filepath.Join(csharpTests(t), "Tests.exe"), "wslive", p.URL())
	cs.expect(t, "CONNECTED ", 30*time.Second)
	cs.expect(t, "LINKUP", 30*time.Second)
	cs.send(t, `CREATE me {"kind":"avatar3d","name":"C#","position":[0,1.6,0],"rotation":[0,0]}`)
	waitUntil(t, "the Go client to see the avatar", 10*time.Second, func() bool { _, ok := goc.World().Get("me"); return ok })
	cs.send(t, `SET me {"position":["up",1,0]}`)
	if reason := cs.expect(t, "REFUSED me ", 10*time.Second); !strings.Contains(reason, "position") {
		t.Fatalf("refused with %q", reason)
	}
	cs.send(t, "WORLD")
	if w := cs.expect(t, "WORLD ", 10*time.Second); !strings.Contains(w, `"me":{`) || !strings.Contains(w, `"position":[0,1.6,0]`) {
		t.Fatalf("after the refusal the C# client holds %s", w)
	}
	if o, _ := goc.World().Get("me"); string(o.Properties.Value("position")) != "[0,1.6,0]" {
		t.Fatalf("the Go client sees position %s", o.Properties.Value("position"))
	}

	// Blocks: a delta with a colour that is markup is refused whole; the
	// client's grid goes back to the node's, version included, and its
	// next block is taken.
	cs.send(t, `CREATE grid {"kind":"grid","position":[0,0,0]}`)
	cs.send(t, `ELEMENTS grid blocks {"0,0,0":{"c":"#d94f4f"}}`)
	waitUntil(t, "the Go client to see the grid", 10*time.Second, func() bool { _, e := goScope(goc, "grid", "blocks"); return e == `{"0,0,0":{"c":"#d94f4f"}}` })
	cs.send(t, `ELEMENTS grid blocks {"1,1,1":{"c":"#5fd38d"},"2,2,2":{"c":"red\"><script>"}}`)
	if reason := cs.expect(t, "REFUSED grid ", 10*time.Second); !strings.Contains(reason, `element "2,2,2": at '/c'`) {
		t.Fatalf("the block refused with %q", reason)
	}
	cs.send(t, "SCOPE grid blocks")
	if got := cs.expect(t, "SCOPE grid blocks ", 10*time.Second); got != `1 {"0,0,0":{"c":"#d94f4f"}}` {
		t.Fatalf("after the refusal C# holds %s", got)
	}
	cs.send(t, `ELEMENTS grid blocks {"3,3,3":{"c":"#4f8fd9"}}`)
	waitUntil(t, "the Go client to see the next block", 10*time.Second, func() bool {
		_, e := goScope(goc, "grid", "blocks")
		return e == `{"0,0,0":{"c":"#d94f4f"},"3,3,3":{"c":"#4f8fd9"}}`
	})
}

// TestCSharpInterest: the C# snapshot client (wire version 3) states a
// region and a room: the ghosts out of them despawn, one that comes into
// the region spawns, one that leaves it despawns, and its world is the
// node's objects of its interest, value for value.
func TestCSharpInterest(t *testing.T) {
	udp := freeUDPAddr(t)
	p := startProc(t, "--tick", "20ms", "--snapshot-listen", udp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goc := dialNode(t, ctx, p.URL(), "gotest")
	for id, props := range map[string]map[string]any{
		"near": {"position": []float64{1, 0, 1}},
		"far":  {"position": []float64{100, 0, 0}},
		"free": {"kind": "sky"},
		"red":  {"position": []float64{2, 0, 0}, "room": "red"},
		"blue": {"position": []float64{3, 0, 0}, "room": "blue"},
	} {
		if err := goc.CreateWithID(id, props); err != nil {
			t.Fatal(err)
		}
	}
	cs := startCSharpClient(t, udp)
	cs.expect(t, "CONNECTED ", 30*time.Second)
	spawned := map[string]bool{}
	for len(spawned) < 5 {
		id, _, _ := strings.Cut(cs.expect(t, "SPAWN ", 10*time.Second), " ")
		spawned[id] = true
	}
	cs.send(t, "INTEREST -10 -10 -10 10 10 10 red")
	cs.expect(t, "INTEREST-OK", 10*time.Second)
	gone := map[string]bool{}
	for len(gone) < 2 {
		gone[cs.expect(t, "DESPAWN ", 10*time.Second)] = true
	}
	if !gone["far"] || !gone["blue"] {
		t.Fatalf("despawned %v, want far and blue", gone)
	}
	if err := goc.Set("far", map[string]any{"position": []float64{5, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "SPAWN far ", 10*time.Second)
	if err := goc.Set("near", map[string]any{"position": []float64{50, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	if got := cs.expect(t, "DESPAWN ", 10*time.Second); got != "near" {
		t.Fatalf("despawned %s, want near", got)
	}
	world := worldOf(t, p)
	for id := range world {
		if id == "near" || id == "blue" {
			delete(world, id)
		}
	}
	cs.send(t, "WORLD")
	if d := viewDiff(t, cs.expect(t, "WORLD ", 10*time.Second), world, false); d != "" {
		t.Fatal(d)
	}
	cs.send(t, "QUIT")
	cs.expect(t, "BYE", 10*time.Second)
}
