package relay

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/solipsism/mesh/peer"
)

func box(x0, y0, z0, x1, y1, z1 float64) peer.Box {
	return peer.Box{Min: [3]float64{x0, y0, z0}, Max: [3]float64{x1, y1, z1}}
}

func worldIDs(c *Client) []string {
	var out []string
	for _, o := range c.World().Objects() {
		out = append(out, o.ID)
	}
	sort.Strings(out)
	return out
}

func ignored(c *Client) uint64 {
	var n uint64
	for _, l := range c.node.Links() {
		n += l.Ignored
	}
	return n
}

// TestInterestRegion: a client with a region sees exactly what is inside
// it, with the margin rule; gains what moves in, loses what moves out,
// never gets a remove for an object it was not sent, and moves its region.
func TestInterestRegion(t *testing.T) {
	_, url := startNode(t, Options{Tick: 5 * time.Millisecond, InterestMargin: 2, InterestCell: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writer, err := Dial(ctx, url, ClientOptions{Prefix: "writer", Tick: 5 * time.Millisecond})
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

	viewer, err := Dial(ctx, url, ClientOptions{Prefix: "viewer", Tick: 5 * time.Millisecond, Interest: []peer.Box{box(0, -10, -10, 10, 10, 10)}})
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
