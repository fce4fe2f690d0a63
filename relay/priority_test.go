package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// region is a viewer's region around the origin: 100 each way.
var region = map[string]any{"min": []float64{-100, -10, -100}, "max": []float64{100, 10, 100}}

// updatesOf counts the records of each object in the worldChange
// messages p received, and their bytes.
func updatesOf(p *wiretest.Peer) (count map[string]int, bytes int) {
	count = map[string]int{}
	for _, m := range p.Messages() {
		if m.Type != "worldChange" {
			continue
		}
		bytes += len(m.Data)
		var wc struct {
			Changes []struct {
				ID string `json:"id"`
			} `json:"changes"`
		}
		json.Unmarshal(m.Data, &wc)
		for _, c := range wc.Changes {
			count[c.ID]++
		}
	}
	return count, bytes
}

// viewerHolds reports whether a wiretest peer holds what the node holds
// of ids.
func viewerHolds(p *wiretest.Peer, n *relay.Node, ids ...string) string {
	objs := p.Objects()
	for _, id := range ids {
		o, ok := n.World().Get(id)
		got, has := objs[id]
		switch {
		case !ok || !has:
			return fmt.Sprintf("%s: at the node %v, at the viewer %v", id, ok, has)
		case string(got.Properties["n"]) != string(o.Properties.Value("n")):
			return fmt.Sprintf("%s: n=%s at the viewer, %s at the node", id, got.Properties["n"], o.Properties.Value("n"))
		}
	}
	return ""
}

// TestPriorityBands: a viewer is sent near objects' changes every tick,
// farther ones less often, and everything's last value; a Go client with
// the same region (which speaks digests) ends with the node's world and
// nothing repaired. With both cores kept busy.
func TestPriorityBands(t *testing.T) {
	stop := wiretest.BusyCores()
	defer stop()
	n, url := startNode(t, relay.Options{Tick: 50 * time.Millisecond, Priority: relay.PriorityOptions{Near: 10}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writer := dialTick(t, ctx, url, 50*time.Millisecond)
	// Bands: near (5 away) every tick, mid (30: band 2) every 4th, far
	// (90: band 3, the last) every 8th.
	at := map[string]float64{"near": 5, "mid": 30, "far": 90}
	for id, x := range at {
		if err := writer.CreateWithID(id, map[string]any{"position": []float64{x, 0, 0}, "n": 0}); err != nil {
			t.Fatal(err)
		}
	}
	viewer := wiretest.Dial(t, url, "client-vvvvvvvv-vvvvvvvv", wiretest.Options{Extra: map[string]any{"interest": region}})
	goViewer, err := client.Dial(ctx, url, client.Options{Tick: 50 * time.Millisecond, DigestInterval: testDigestInterval,
		Interest: []peer.Box{{Min: [3]float64{-100, -10, -100}, Max: [3]float64{100, 10, 100}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer goViewer.Close()
	viewer.Wait("the three objects", 10*time.Second, func(o map[string]wiretest.Object) bool { return len(o) == 3 })
	before, _ := updatesOf(viewer)
	const rounds = 80
	for i := 1; i <= rounds; i++ {
		for id := range at {
			writer.Set(id, map[string]any{"n": i})
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, "the node holds the last values", 10*time.Second, func() bool {
		o, _ := n.World().Get("far")
		return string(o.Properties.Value("n")) == fmt.Sprint(rounds)
	})
	var diff string
	waitFor(t, "the viewer holds the last values", 5*time.Second, func() bool {
		diff = viewerHolds(viewer, n, "near", "mid", "far")
		return diff == ""
	})
	sameWorld(t, "the Go viewer holds the node's world", n, goViewer)
	after, _ := updatesOf(viewer)
	near, mid, far := after["near"]-before["near"], after["mid"]-before["mid"], after["far"]-before["far"]
	t.Logf("updates over %d rounds: near %d, mid %d, far %d", rounds, near, mid, far)
	if !(far*3 < near && mid*2 < near && far <= mid) {
		t.Errorf("updates sent near %d, mid %d, far %d: want far ones less often", near, mid, far)
	}
	if r := goViewer.Node().Repairs(); r[relay.RepairMissing]+r[relay.RepairStale]+r[relay.RepairExtra] > 0 {
		t.Errorf("repairs at the Go viewer: %v", r)
	}
	viewer.CheckClean()
}

// TestPriorityOneBand: with one band everything is near, so a viewer is
// sent every object's changes every tick, however far it is (bands beyond
// near lost the far ones' changes for good).
func TestPriorityOneBand(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 50 * time.Millisecond, Priority: relay.PriorityOptions{Near: 10, Bands: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writer := dialTick(t, ctx, url, 50*time.Millisecond)
	for id, x := range map[string]float64{"near": 5, "far": 90} {
		if err := writer.CreateWithID(id, map[string]any{"position": []float64{x, 0, 0}, "n": 0}); err != nil {
			t.Fatal(err)
		}
	}
	viewer := wiretest.Dial(t, url, "client-vvvvvvvv-vvvvvvvv", wiretest.Options{Extra: map[string]any{"interest": region}})
	viewer.Wait("the two objects", 10*time.Second, func(o map[string]wiretest.Object) bool { return len(o) == 2 })
	before, _ := updatesOf(viewer)
	const rounds = 20
	for i := 1; i <= rounds; i++ {
		writer.Set("near", map[string]any{"n": i})
		writer.Set("far", map[string]any{"n": i})
		time.Sleep(100 * time.Millisecond)
	}
	var diff string
	waitFor(t, "the viewer holds the last values", 5*time.Second, func() bool {
		diff = viewerHolds(viewer, n, "near", "far")
		return diff == ""
	})
	after, _ := updatesOf(viewer)
	if near, far := after["near"]-before["near"], after["far"]-before["far"]; far < near*3/4 {
		t.Errorf("updates sent near %d, far %d: want as many", near, far)
	}
	viewer.CheckClean()
}

// TestBudget: while 40 objects change every tick (about 60,000 bytes a
// second), a viewer that asks for 3,000 bytes a second is sent about that,
// one that asks nothing about the node's cap (6,000), and a relay (a
// proxy, a page's worker: its clients are held at their own links)
// everything; each then gets every last value.
func TestBudget(t *testing.T) {
	const budget, capB = 3000, 6000
	n, url := startNode(t, relay.Options{Tick: 50 * time.Millisecond, Priority: relay.PriorityOptions{MaxBytesPerSecond: capB}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writer := dialTick(t, ctx, url, 50*time.Millisecond)
	pad := strings.Repeat("x", 100)
	var ids []string
	for k := range 40 {
		id := fmt.Sprintf("o-%02d", k)
		ids = append(ids, id)
		if err := writer.CreateWithID(id, map[string]any{"position": []float64{float64(k), 0, 0}, "pad": pad, "n": 0}); err != nil {
			t.Fatal(err)
		}
	}
	slow := wiretest.Dial(t, url, "client-ssssssss-ssssssss", wiretest.Options{Extra: map[string]any{"interest": region, "budget": budget}})
	capped := wiretest.Dial(t, url, "client-cccccccc-cccccccc", wiretest.Options{Extra: map[string]any{"interest": region}})
	relay_ := wiretest.Dial(t, url, "proxy-pppppppp-pppppppp", wiretest.Options{Extra: map[string]any{"interest": region, "role": "proxy"}})
	for _, v := range []*wiretest.Peer{slow, capped, relay_} {
		v.Wait("the objects", 30*time.Second, func(o map[string]wiretest.Object) bool { return len(o) == len(ids) })
		// The answer to its refresh request (the world as it is, outside
		// any budget) too: it may come after the objects' adds.
		waitFor(t, "the refresh answer", 10*time.Second, func() bool {
			for _, m := range v.Messages() {
				if m.Type == "worldChange" && strings.Contains(string(m.Data), `"refreshed":true`) {
					return true
				}
			}
			return false
		})
	}
	_, slow0 := updatesOf(slow)
	_, capped0 := updatesOf(capped)
	_, relay0 := updatesOf(relay_)
	start := time.Now()
	const rounds = 60
	for i := 1; i <= rounds; i++ {
		for _, id := range ids {
			writer.Set(id, map[string]any{"n": i})
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start).Seconds()
	_, slow1 := updatesOf(slow)
	_, capped1 := updatesOf(capped)
	_, relay1 := updatesOf(relay_)
	sent, held, relayed := float64(slow1-slow0), float64(capped1-capped0), float64(relay1-relay0)
	t.Logf("over %.1f s: %.0f B/s to the viewer that asked %d, %.0f B/s to the one held to the node's cap of %d, %.0f B/s to the relay",
		took, sent/took, budget, held/took, capB, relayed/took)
	// A budget counts the records; messages add their envelope.
	if sent > 1.5*budget*took+budget {
		t.Errorf("the viewer that asked %d B/s was sent %.0f B/s", budget, sent/took)
	}
	if held > 1.5*capB*took+capB || held <= sent {
		t.Errorf("the viewer held to the node's cap of %d B/s was sent %.0f B/s (the one that asked %d: %.0f)", capB, held/took, budget, sent/took)
	}
	if relayed < 5*held {
		t.Errorf("the relay was sent %.0f B, hardly more than a capped client (%.0f B): the node's cap held it", relayed, held)
	}
	var diff string
	for _, v := range []*wiretest.Peer{slow, capped, relay_} {
		waitFor(t, "every last value", 30*time.Second, func() bool {
			diff = viewerHolds(v, n, ids...)
			return diff == ""
		})
		v.CheckClean()
	}
}

// TestPriorityKeepsMessageOrder: a message comes after the changes its
// sender made before it, however far the objects are.
func TestPriorityKeepsMessageOrder(t *testing.T) {
	_, url := startNode(t, relay.Options{Tick: 50 * time.Millisecond, Priority: relay.PriorityOptions{Near: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writer := dialTick(t, ctx, url, 50*time.Millisecond)
	if err := writer.CreateWithID("far", map[string]any{"position": []float64{90, 0, 0}, "n": 0}); err != nil {
		t.Fatal(err)
	}
	viewer := wiretest.Dial(t, url, "client-mmmmmmmm-mmmmmmmm", wiretest.Options{Features: []string{"messages"}, Extra: map[string]any{"interest": region}})
	viewer.WaitHas("far")
	for i := 1; i <= 5; i++ {
		writer.Set("far", map[string]any{"n": i})
		if err := writer.Send(peer.AppMessage{Type: "moved", Data: json.RawMessage(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "the five messages", 10*time.Second, func() bool { return len(viewer.AppMessages()) == 5 })
	// Replay what the viewer got: at each message, far is at least where
	// the writer had put it.
	n := 0
	for _, m := range viewer.Messages() {
		switch m.Type {
		case "worldChange":
			var wc struct {
				Changes []struct {
					ID         string         `json:"id"`
					Properties map[string]int `json:"properties"`
				} `json:"changes"`
			}
			json.Unmarshal(m.Data, &wc)
			for _, c := range wc.Changes {
				if v, ok := c.Properties["n"]; c.ID == "far" && ok {
					n = v
				}
			}
		case "message":
			var am struct {
				Data int `json:"data"`
			}
			json.Unmarshal(m.Data, &am)
			if n < am.Data {
				t.Errorf("message %d arrived with far at n=%d", am.Data, n)
			}
		}
	}
	viewer.CheckClean()
}

// TestScheduledCrowdConverges: a crowd under priority without budgets
// (the node's shared schedule): 80 objects hop about a 40 × 40 square,
// some go and others come in their slots, while 12 viewers watch, their
// regions huge (not indexed), holding the whole square (indexed), or
// small and moving; a 2016-style viewer watches everything. At the end
// each holds exactly the objects of its last region, at the node's
// values, was never sent a record of an object it lacks, and the 2016
// viewer was sent nothing that would crash it. Both cores kept busy.
func TestScheduledCrowdConverges(t *testing.T) {
	stop := wiretest.BusyCores()
	defer stop()
	n, url := startNode(t, relay.Options{Tick: 20 * time.Millisecond, InterestMargin: 0.5, InterestCell: 8,
		Priority: relay.PriorityOptions{Near: 5, Bands: 4}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writer := dialTick(t, ctx, url, 5*time.Millisecond)
	rng := rand.New(rand.NewPCG(7, 8))
	type spot struct{ x, z int }
	place := func(p spot, v int) map[string]any {
		return map[string]any{"position": []float64{float64(p.x), 0, float64(p.z)}, "v": v}
	}
	at := map[string]spot{}
	var ids []string
	for i := range 80 {
		id := fmt.Sprint("o", i)
		at[id] = spot{rng.IntN(41), rng.IntN(41)}
		ids = append(ids, id)
		if err := writer.CreateWithID(id, place(at[id], 0)); err != nil {
			t.Fatal(err)
		}
	}
	// A box of whole numbers from (x, z) to (x+w, z+w), none within the
	// margin outside.
	square := func(x, z, w int) peer.Box {
		return box(float64(x)-0.25, -1, float64(z)-0.25, float64(x+w)+0.25, 1, float64(z+w)+0.25)
	}
	regions := make([]peer.Box, 12)
	viewers := make([]*client.Client, 12)
	for i := range viewers {
		switch {
		case i < 4:
			regions[i] = box(-10000, -10000, -10000, 10000, 10000, 10000)
		case i < 6:
			regions[i] = square(-5, -5, 50)
		default:
			regions[i] = square(rng.IntN(30), rng.IntN(30), 12)
		}
		viewers[i] = dialTick(t, ctx, url, 5*time.Millisecond)
		viewers[i].SetInterest([]peer.Box{regions[i]})
	}
	old := wiretest.Dial(t, url, "client-oooooooo-oooooooo", wiretest.Options{Extra: map[string]any{"interest": map[string]any{"min": []int{-1000, -10, -1000}, "max": []int{1000, 10, 1000}}}})
	for step := 1; step <= 150; step++ {
		for range 10 { // hops of one, within the square
			id := ids[rng.IntN(len(ids))]
			p := at[id]
			p.x = min(40, max(0, p.x+rng.IntN(3)-1))
			p.z = min(40, max(0, p.z+rng.IntN(3)-1))
			at[id] = p
			if err := writer.Set(id, place(p, step)); err != nil {
				t.Fatal(err)
			}
		}
		if step%10 == 0 { // one goes, another comes
			k := rng.IntN(len(ids))
			gone := ids[k]
			if err := writer.Remove(gone); err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprint("n", step)
			at[id], ids[k] = at[gone], id
			delete(at, gone)
			if err := writer.CreateWithID(id, place(at[id], step)); err != nil {
				t.Fatal(err)
			}
		}
		if step%5 == 0 {
			i := 6 + rng.IntN(6)
			regions[i] = square(rng.IntN(30), rng.IntN(30), 12)
			viewers[i].SetInterest([]peer.Box{regions[i]})
		}
		time.Sleep(time.Duration(1+step%5) * time.Millisecond)
	}
	for i, v := range viewers {
		var want []string
		for id, p := range at {
			if regions[i].Contains([3]float64{float64(p.x), 0, float64(p.z)}, 0) {
				want = append(want, id)
			}
		}
		if !await(15*time.Second, func() bool { return holdsExactly(v, n, want) }) {
			t.Fatalf("viewer %d (region %v) sees %d objects, want %d at the node's values:\n got %v\nwant %v", i, regions[i], len(worldIDs(v)), len(want), worldIDs(v), want)
		}
		if k := ignored(v); k != 0 {
			t.Fatalf("viewer %d got %d records for objects it was never sent", i, k)
		}
	}
	var diff string
	if !await(15*time.Second, func() bool {
		held := old.Objects()
		if len(held) != len(at) {
			diff = fmt.Sprintf("%d objects, the node %d", len(held), len(at))
			return false
		}
		for _, id := range ids {
			o, _ := n.World().Get(id)
			if got := string(held[id].Properties["v"]); got != string(o.Properties.Value("v")) {
				diff = fmt.Sprintf("%s at v=%s, the node at %s", id, got, o.Properties.Value("v"))
				return false
			}
		}
		return true
	}) {
		t.Fatal("the 2016 viewer holds", diff)
	}
	old.CheckClean()
}

// TestNearDueInTheSameMessage: a near object that changes every tick has
// its due (its whole pending state, published to near viewers every
// 2^(bands-1) ticks, each object at a tick of its own) at ticks where it
// has a change too: the due takes the change's place in the viewer's
// message, rather than following it in a second message of the same
// value. (Sent apart, the two made every second tick's message twice,
// and most links in a crowd write two messages most ticks.) With both
// cores kept busy.
func TestNearDueInTheSameMessage(t *testing.T) {
	stop := wiretest.BusyCores()
	defer stop()
	const tick = 50 * time.Millisecond
	n, url := startNode(t, relay.Options{Tick: tick, Priority: relay.PriorityOptions{Near: 10, Bands: 2}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The writer changes the object four times a tick, so that every tick
	// has a change of it, and every due comes with one.
	writer := dialTick(t, ctx, url, tick/4)
	if err := writer.CreateWithID("near", map[string]any{"position": []float64{5, 0, 0}, "n": 0}); err != nil {
		t.Fatal(err)
	}
	viewer := wiretest.Dial(t, url, "client-vvvvvvvv-vvvvvvvv", wiretest.Options{Extra: map[string]any{"interest": region}})
	viewer.Wait("the object", 10*time.Second, func(o map[string]wiretest.Object) bool { return len(o) == 1 })
	before := len(viewer.Messages())
	const rounds = 240
	for i := 1; i <= rounds; i++ {
		writer.Set("near", map[string]any{"n": i, "position": []float64{5 + float64(i%2)/10, 0, 0}})
		time.Sleep(tick / 4)
	}
	var diff string
	waitFor(t, "the viewer holds the last value", 10*time.Second, func() bool {
		diff = viewerHolds(viewer, n, "near")
		return diff == ""
	})
	// Messages in a row that carry the same value, within the tick: the
	// change and its due apart, every second tick. (A due also comes with
	// the value the viewer has at a tick without a change, when the writer
	// is late; within the tick when a busy node's late tick is followed by
	// one on time: one message in 20 to 40 here, against one in 4 apart.)
	type sent struct {
		n  string
		at time.Time
	}
	var got []sent
	for _, m := range viewer.Messages()[before:] {
		if m.Type != "worldChange" {
			continue
		}
		var wc struct {
			Changes []struct {
				ID         string                     `json:"id"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"changes"`
		}
		json.Unmarshal(m.Data, &wc)
		for _, c := range wc.Changes {
			if c.ID == "near" {
				got = append(got, sent{string(c.Properties["n"]), m.At})
			}
		}
	}
	repeats := 0
	for i := 1; i < len(got); i++ {
		if got[i].n == got[i-1].n && got[i].at.Sub(got[i-1].at) < tick*3/4 {
			repeats++
		}
	}
	t.Logf("%d messages of the object over %d changes, %d of them its value again within the tick", len(got), rounds, repeats)
	if repeats > len(got)/10 {
		t.Errorf("%d of %d messages repeat within the tick the value the one before carried: the due sent apart from the change", repeats, len(got))
	}
	viewer.CheckClean()
}
