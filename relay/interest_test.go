package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

func box(x0, y0, z0, x1, y1, z1 float64) peer.Box {
	return peer.Box{Min: [3]float64{x0, y0, z0}, Max: [3]float64{x1, y1, z1}}
}

func worldIDs(c *client.Client) []string {
	var out []string
	for _, o := range c.World().Objects() {
		out = append(out, o.ID)
	}
	sort.Strings(out)
	return out
}

// holdsExactly reports whether viewer holds the objects want and no
// other, each at the node's values.
func holdsExactly(viewer *client.Client, n *relay.Node, want []string) bool {
	if !sameSet(worldIDs(viewer), want...) {
		return false
	}
	for _, id := range want {
		o, _ := viewer.World().Get(id)
		w, _ := n.World().Get(id)
		if !o.Properties.Equal(w.Properties) {
			return false
		}
	}
	return true
}

func ignored(c *client.Client) uint64 {
	var n uint64
	for _, l := range c.Node().Links() {
		n += l.Ignored
	}
	return n
}

// TestInterestRegion: a client with a region sees exactly what is inside
// it, with the margin rule; gains what moves in, loses what moves out,
// never gets a remove for an object it was not sent, and moves its region.
func TestInterestRegion(t *testing.T) {
	_, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond, InterestMargin: 2, InterestCell: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writer, err := client.Dial(ctx, url, client.Options{Prefix: "writer", Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	at := func(x float64) map[string]any { return map[string]any{"position": []float64{x, 0, 0}} }
	for id, x := range map[string]float64{"in": 5, "edge": 11, "out": 50, "far": -30} {
		if err := writer.CreateWithID(id, at(x)); err != nil {
			t.Fatal(err)
		}
	}
	writer.CreateWithID("nowhere", map[string]any{"color": "red"})

	viewer, err := client.Dial(ctx, url, client.Options{Prefix: "viewer", Tick: 5 * time.Millisecond, Interest: []peer.Box{box(0, -10, -10, 10, 10, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	mine, _ := viewer.Create(at(500)) // its own object, far outside its region
	want := func(what string, ids ...string) {
		t.Helper()
		sort.Strings(ids)
		deadline := time.Now().Add(5 * time.Second)
		for !sameSet(worldIDs(viewer), ids...) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: viewer sees %v, want %v", what, worldIDs(viewer), ids)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond) // and nothing else arrives
		if got := worldIDs(viewer); !sameSet(got, ids...) {
			t.Fatalf("%s: viewer sees %v, want %v", what, got, ids)
		}
	}
	want("the objects inside and those without a position", "in", "nowhere", mine)

	{ // moving in, along the margin, and out
		writer.Set("out", at(9))
		want("the object that moved in", "in", "out", "nowhere", mine)
		writer.Set("out", at(11.5)) // within the margin: stays
		time.Sleep(50 * time.Millisecond)
		want("the object in the margin staying", "in", "out", "nowhere", mine)
		writer.Set("edge", at(11.8)) // in the margin but never inside: not sent
		writer.Set("out", at(13))    // beyond the margin: leaves
		want("the object that moved out", "in", "nowhere", mine)
		writer.Set("far", at(-40)) // far away, never sent
		writer.Remove("far")
		time.Sleep(50 * time.Millisecond)
		if n := ignored(viewer); n != 0 {
			t.Fatalf("the viewer got %d records for objects it was never sent", n)
		}
	}
	{ // moving the region
		viewer.SetInterest([]peer.Box{box(40, -10, -10, 60, 10, 10)})
		writer.CreateWithID("fifty", at(50))
		want("the objects of the new region", "fifty", "nowhere", mine)
		viewer.SetInterest(nil)
		want("everything", "in", "edge", "out", "fifty", "nowhere", mine)
		viewer.SetInterest([]peer.Box{})
		want("nothing but what has no position", "nowhere", mine)
		if n := ignored(viewer); n != 0 {
			t.Fatalf("the viewer got %d records for objects it was never sent", n)
		}
	}
}

// TestRegionProxies: a server with four region proxies, two with a
// configured region and two announcing their clients' union. Each proxy
// receives only its quadrant's objects, clients of different quadrants do
// not see each other, and a client that crosses a border and reconnects to
// the neighbouring proxy sees the neighbour's objects.
func TestRegionProxies(t *testing.T) {
	server, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond, InterestCell: 8})
	quad := func(i int) peer.Box {
		x0, z0 := float64(i%2)*100, float64(i/2)*100
		return box(x0, -1000, z0, x0+100, 1000, z0+100)
	}
	center := func(i int) []float64 { b := quad(i); return []float64{b.Min[0] + 50, 0, b.Min[2] + 50} }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var proxies []*relay.Node
	var urls []string
	var clients []*client.Client
	for i := range 4 {
		opts := relay.Options{Tick: 5 * time.Millisecond, InterestCell: 8}
		if i < 2 {
			opts.Interest = []peer.Box{quad(i)}
		}
		p, purl := startProxy(t, url, opts)
		proxies, urls = append(proxies, p), append(urls, purl)
		c, err := client.Dial(ctx, purl, client.Options{Prefix: "player", Tick: 5 * time.Millisecond, Interest: []peer.Box{quad(i)}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
		if _, err := c.Create(map[string]any{"position": center(i), "avatar": i}); err != nil {
			t.Fatal(err)
		}
	}
	// Scenery in every quadrant, owned by the server.
	for i := range 4 {
		for k := range 5 {
			p := center(i)
			p[0] += float64(k)
			pos, _ := json.Marshal(p)
			add := gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("tree-%d-%d", i, k), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": pos})}
			if _, err := server.Apply([]gameworld.Change{add}); err != nil {
				t.Fatal(err)
			}
		}
	}
	inQuad := func(i int, props gameworld.Properties) bool {
		var p [3]float64
		json.Unmarshal(props.Value("position"), &p)
		return quad(i).Contains(p, relay.DefaultInterestMargin)
	}
	for i, c := range clients {
		waitFor(t, "each client to see its quadrant's trees", 10*time.Second, func() bool { return len(c.World().Objects()) >= 6 })
		time.Sleep(50 * time.Millisecond)
		for _, o := range c.World().Objects() {
			if !inQuad(i, o.Properties) {
				t.Errorf("client %d sees %s at %s", i, o.ID, o.Properties.Value("position"))
			}
		}
		if n := len(c.World().Objects()); n != 6 {
			t.Errorf("client %d sees %d objects, want its avatar and 5 trees", i, n)
		}
		for _, o := range proxies[i].World().Objects() {
			if !inQuad(i, o.Properties) {
				t.Errorf("proxy %d received %s at %s", i, o.ID, o.Properties.Value("position"))
			}
		}
	}

	// The client of quadrant 0 walks into quadrant 1 and moves to its proxy.
	id := clients[0].Identifier()
	var avatar string
	for _, o := range clients[0].World().Objects() {
		if o.Owner == id {
			avatar = o.ID
		}
	}
	clients[0].Set(avatar, map[string]any{"position": center(1), "avatar": 0})
	time.Sleep(50 * time.Millisecond)
	clients[0].Close()
	moved, err := client.Dial(ctx, urls[1], client.Options{Identifier: id, Tick: 5 * time.Millisecond, Interest: []peer.Box{quad(1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	waitFor(t, "the moved client to see quadrant 1's avatar and trees", 10*time.Second, func() bool {
		n := 0
		for _, o := range moved.World().Objects() {
			if inQuad(1, o.Properties) {
				n++
			}
		}
		return n >= 6
	})
}

// TestRegionLatestWins: a peer that announces regions faster than a node
// applies them (relay.RegionEvery) ends up with exactly its last region's
// objects, however its announcements fell between the node's ticks, and
// also on a node that sends at once (no tick loop).
func TestRegionLatestWins(t *testing.T) {
	for _, tick := range []time.Duration{5 * time.Millisecond, peer.Immediate} {
		t.Run(fmt.Sprint("tick ", tick), func(t *testing.T) { regionLatestWins(t, tick) })
	}
}

func regionLatestWins(t *testing.T, tick time.Duration) {
	_, url := startNode(t, relay.Options{Tick: tick, InterestMargin: 0.5, InterestCell: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writer := dialTick(t, ctx, url, 5*time.Millisecond)
	for x := range 100 {
		if err := writer.CreateWithID(fmt.Sprint("x", x), map[string]any{"position": []float64{float64(x), 0, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	viewer := dialTick(t, ctx, url, 2*time.Millisecond)
	if !await(10*time.Second, func() bool { return viewer.World().Len() == 100 }) {
		t.Fatalf("the viewer holds %d of 100 objects", viewer.World().Len())
	}
	// Ten integer positions from a, and none within the margin outside.
	at := func(a int) []peer.Box { return []peer.Box{box(float64(a)-0.25, -1, -1, float64(a)+9.25, 1, 1)} }
	for i := range 60 {
		viewer.SetInterest(at((i * 37) % 90))
		time.Sleep(3 * time.Millisecond)
	}
	const last = 41
	viewer.SetInterest(at(last))
	var want []string
	for x := last; x < last+10; x++ {
		want = append(want, fmt.Sprint("x", x))
	}
	sort.Strings(want)
	if !await(10*time.Second, func() bool { return sameSet(worldIDs(viewer), want...) }) {
		t.Fatalf("the viewer sees %v, want %v", worldIDs(viewer), want)
	}
	time.Sleep(3 * relay.RegionEvery) // no older region applies late
	if got := worldIDs(viewer); !sameSet(got, want...) {
		t.Fatalf("the viewer sees %v after a while, want %v", got, want)
	}
	if n := ignored(viewer); n != 0 {
		t.Fatalf("the viewer got %d records for objects it was never sent", n)
	}
}

// TestRegionChangeSliced: a region that widens to everything in a big
// world is looked at a slice at a time, the node's lock let go between,
// and another peer's object gets in meanwhile; the viewer ends with the
// node's whole world. Narrowed again, it ends with exactly what is in its
// box, and it is never sent a remove of an object it was not sent.
func TestRegionChangeSliced(t *testing.T) {
	const objects = 2*relay.RefreshSlice + 7
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	writer := dialTick(t, ctx, url, 5*time.Millisecond)
	changes := make([]gameworld.Change, 0, objects)
	for k := range objects {
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o-%06d", k),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage(fmt.Sprintf("[%d,0,0]", k))})})
	}
	if _, err := writer.Node().Apply(changes); err != nil {
		t.Fatal(err)
	}
	viewer, err := client.Dial(ctx, url, client.Options{Tick: 5 * time.Millisecond, Interest: []peer.Box{}})
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	prober := dialTick(t, ctx, url, 5*time.Millisecond)
	waitFor(t, "the node holds the objects", 30*time.Second, func() bool { return n.World().Len() == objects })
	slices, probed := 0, false
	var probeErr error
	n.SetRevealHook(func(done bool) {
		slices++
		if !probed {
			// The node's lock is let go after this slice: the probe
			// gets in before the rest of the world is looked at.
			probed = true
			go func() { probeErr = prober.CreateWithID("probe", map[string]any{"n": 1}) }()
		}
	})
	viewer.SetInterest(nil)
	sameWorld(t, "the viewer holds the node's world", n, viewer)
	var got int
	n.Locked(func() { got = slices })
	n.SetRevealHook(nil)
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	if got < 3 {
		t.Errorf("the region change took %d slices, want one per %d objects (3)", got, relay.RefreshSlice)
	}
	viewer.SetInterest([]peer.Box{box(99.5, -1, -1, 120.5, 1, 1)})
	// In the box, or near enough its edge (the margin, 2) to stay; the
	// probe has no position.
	want := []string{"probe"}
	for x := 98; x <= 122; x++ {
		want = append(want, fmt.Sprintf("o-%06d", x))
	}
	if !await(30*time.Second, func() bool { return sameSet(worldIDs(viewer), want...) }) {
		t.Fatalf("after narrowing the viewer holds %d objects, want the %d in its box and margin", viewer.World().Len(), len(want))
	}
	if k := ignored(viewer); k != 0 {
		t.Fatalf("the viewer got %d records for objects it was never sent", k)
	}
}

// TestRegionWhileRefreshWanted: a peer that holds the world asks for a
// refresh again and, before the answer, narrows its region: what left the
// region is removed (a refresh answer only adds), and it ends with the
// region's objects alone.
func TestRegionWhileRefreshWanted(t *testing.T) {
	_, url := startNode(t, relay.Options{Tick: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writer := dialTick(t, ctx, url, 5*time.Millisecond)
	for x := range 20 {
		if err := writer.CreateWithID(fmt.Sprint("x", x), map[string]any{"position": []float64{float64(x), 0, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	p := wiretest.Dial(t, url, "client-rrrrrrrr-rrrrrrrr", wiretest.Options{})
	p.Wait("the world", 10*time.Second, func(objs map[string]wiretest.Object) bool { return len(objs) == 20 })
	// Both in one tick of the node: the refresh is still to come when the
	// region changes.
	p.Send("requestRefresh", nil)
	p.Send("metadataChange", map[string]any{"identifier": "client-rrrrrrrr-rrrrrrrr", "interest": map[string]any{"min": []float64{-0.5, -1, -1}, "max": []float64{4.5, 1, 1}}})
	// (x5 and x6, within the default margin of 2, stay as they are.)
	p.Wait("the region's objects alone", 10*time.Second, func(objs map[string]wiretest.Object) bool {
		return len(objs) == 7 && objs["x0"].Owner != "" && objs["x6"].Owner != ""
	})
	p.CheckClean()
}

// TestRegionRemovedWhileHiding: a region narrowed to nothing in a big world
// hides its objects a slice at a time; objects removed from the world
// before the pass reaches them must still be removed from the viewer (the
// pass never meets them), and the slots they free, taken by new objects,
// must not pass for known: widened again, the viewer holds the node's
// world exactly.
func TestRegionRemovedWhileHiding(t *testing.T) {
	const objects = 2*relay.RefreshSlice + 7
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The node's own objects: it removes some itself, as their owner.
	changes := make([]gameworld.Change, 0, objects)
	for k := range objects {
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o-%06d", k),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage(fmt.Sprintf("[%d,0,0]", k))})})
	}
	if _, err := n.Apply(changes); err != nil {
		t.Fatal(err)
	}
	viewer := dialTick(t, ctx, url, 5*time.Millisecond)
	waitFor(t, "the viewer holds the world", 30*time.Second, func() bool { return viewer.World().Len() == objects })
	removed := false
	n.SetRevealHook(func(done bool) {
		if removed {
			return
		}
		removed = true
		// After the first slice, before the pass reaches them: objects
		// in the last slots go (the node owns them).
		var gone []gameworld.Change
		for k := objects - 100; k < objects; k++ {
			gone = append(gone, gameworld.Change{Type: gameworld.Remove, ID: fmt.Sprintf("o-%06d", k)})
		}
		n.ApplyLocked(gone)
	})
	viewer.SetInterest([]peer.Box{})
	waitFor(t, "the viewer holds nothing", 30*time.Second, func() bool { return viewer.World().Len() == 0 })
	n.SetRevealHook(nil)
	var ok bool
	n.Locked(func() { ok = removed })
	if !ok {
		t.Fatal("the hide pass was not sliced")
	}
	// New objects take the freed slots.
	var again []gameworld.Change
	for k := range 100 {
		again = append(again, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("new-%03d", k),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage(fmt.Sprintf("[%d,0,0]", k))})})
	}
	if _, err := n.Apply(again); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node holds the new objects", 10*time.Second, func() bool { _, ok := n.World().Get("new-099"); return ok })
	viewer.SetInterest(nil)
	sameWorld(t, "the viewer holds the node's world", n, viewer)
	time.Sleep(3 * testDigestInterval)
	if r := viewer.Node().Repairs(); r[relay.RepairMissing]+r[relay.RepairStale]+r[relay.RepairExtra] > 0 {
		t.Errorf("the viewer repaired %v: it was not told what went, or not sent what came", r)
	}
}

// TestRegionMovesWhileObjectsMove: a viewer moves its region along a row
// of objects while their writer moves them, removes some and puts new ones
// in (in the slots those leave), each step of both within a tick or two,
// so that region changes meet changes not yet flushed (the node applies a
// ready link's new region at the end of a flush, after offering it the log
// by the region it had). The viewer ends holding exactly the objects
// inside its last region, each at its last value, and is never sent a
// record of an object it was not sent.
func TestRegionMovesWhileObjectsMove(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 10 * time.Millisecond, InterestMargin: 0.5, InterestCell: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	writer := dialTick(t, ctx, url, 3*time.Millisecond)
	place := func(x, v int) map[string]any { return map[string]any{"position": []float64{float64(x), 0, 0}, "v": v} }
	xs := map[string]int{} // the live objects' places
	var ids []string
	for i := range 60 {
		id := fmt.Sprint("o", i)
		xs[id] = i * 2
		ids = append(ids, id)
		if err := writer.CreateWithID(id, place(xs[id], 0)); err != nil {
			t.Fatal(err)
		}
	}
	viewer := dialTick(t, ctx, url, 3*time.Millisecond)
	// Whole numbers from a to a+20, and none within the margin outside.
	at := func(a int) []peer.Box { return []peer.Box{box(float64(a)-0.25, -1, -1, float64(a)+20.25, 1, 1)} }
	viewer.SetInterest(at(0))
	for step := 1; step <= 80; step++ {
		for k := range 3 { // three objects hop by one, back and forth
			id := ids[(step*7+k*13)%len(ids)]
			xs[id] += 1 - 2*(step%2)
			if err := writer.Set(id, place(xs[id], step)); err != nil {
				t.Fatal(err)
			}
		}
		if step%4 == 0 { // one goes, another comes where it was
			k := (step * 11) % len(ids)
			gone, x := ids[k], xs[ids[k]]
			if err := writer.Remove(gone); err != nil {
				t.Fatal(err)
			}
			delete(xs, gone)
			id := fmt.Sprint("n", step)
			xs[id], ids[k] = x, id
			if err := writer.CreateWithID(id, place(x, step)); err != nil {
				t.Fatal(err)
			}
		}
		viewer.SetInterest(at(step % 100))
		time.Sleep(time.Duration(2+step%4) * time.Millisecond)
	}
	const last = 37
	viewer.SetInterest(at(last))
	var want []string
	for id, x := range xs {
		if x >= last && x <= last+20 {
			want = append(want, id)
		}
	}
	same := func() bool { return holdsExactly(viewer, n, want) }
	if !await(10*time.Second, same) {
		t.Fatalf("the viewer sees %v, want %v at the node's values", worldIDs(viewer), want)
	}
	time.Sleep(3 * relay.RegionEvery) // no older region applies late
	if !same() {
		t.Fatalf("the viewer sees %v after a while, want %v at the node's values", worldIDs(viewer), want)
	}
	if k := ignored(viewer); k != 0 {
		t.Fatalf("the viewer got %d records for objects it was never sent", k)
	}
}

// TestManyRegionsBehindAProxy: a proxy whose 80 clients hold more regions
// than one metadata may name announces a cover of them upstream, not
// everything: of scenery over a 400 × 400 square, it receives only what
// lies near its clients (the west half), and each client sees exactly
// what its region holds. Announcing everything, the proxy took the east
// half too.
func TestManyRegionsBehindAProxy(t *testing.T) {
	server, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond})
	for x := 5; x < 400; x += 10 {
		for z := 5; z < 400; z += 40 {
			pos, _ := json.Marshal([]int{x, 0, z})
			add := gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("tree-%d-%d", x, z), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": pos})}
			if _, err := server.Apply([]gameworld.Change{add}); err != nil {
				t.Fatal(err)
			}
		}
	}
	proxy, purl := startProxy(t, url, relay.Options{Tick: 5 * time.Millisecond})
	type viewer struct {
		p    *wiretest.Peer
		area peer.Box
	}
	var viewers []viewer
	for i := range 80 {
		// 8 × 10 clients 20 apart over the west half, each seeing 12
		// around it.
		x, z := 20+float64(i%8)*20, 10+float64(i/8)*40
		area := box(x-12, -5, z-12, x+12, 5, z+12)
		p := wiretest.Dial(t, purl, fmt.Sprintf("client-%08d-manyregs", i), wiretest.Options{Extra: map[string]any{
			"interest": map[string]any{"min": area.Min, "max": area.Max}}})
		viewers = append(viewers, viewer{p, area})
	}
	inside := func(b peer.Box, id string) bool {
		var x, z int
		fmt.Sscanf(id, "tree-%d-%d", &x, &z)
		return b.Contains([3]float64{float64(x), 0, float64(z)}, 0)
	}
	for i, v := range viewers {
		var want []string
		for _, o := range server.World().Objects() {
			if inside(v.area, o.ID) {
				want = append(want, o.ID)
			}
		}
		v.p.Wait(fmt.Sprintf("viewer %d sees its %d trees", i, len(want)), 10*time.Second, func(objs map[string]wiretest.Object) bool {
			if len(objs) != len(want) {
				return false
			}
			for _, id := range want {
				if _, ok := objs[id]; !ok {
					return false
				}
			}
			return true
		})
		v.p.CheckClean()
	}
	var east []string
	for _, o := range proxy.World().Objects() {
		var x int
		fmt.Sscanf(o.ID, "tree-%d-", &x)
		if x > 256 { // beyond the clients' regions (x ≤ 172) and a column of 64 past
			east = append(east, o.ID)
		}
	}
	if len(east) > 0 {
		t.Fatalf("the proxy received %d trees of the east half, e.g. %v", len(east), firstFew(east))
	}
}

func firstFew(ids []string) []string { return ids[:min(len(ids), 5)] }
