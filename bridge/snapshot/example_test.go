package snapshot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/solipsism/mesh/bridge/snapshot"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
)

// A game engine follows the world over UDP, and moves a ball it owns.
func ExampleDial() {
	node, _ := relay.New(relay.Options{})
	defer node.Close(context.Background())
	srv, err := snapshot.Listen(node, "127.0.0.1:0", snapshot.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, err := snapshot.Dial(ctx, srv.Addr().String(), snapshot.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	engine.Set("ball", map[string]any{"ghostType": "transform", "position": []float64{1, 2, 3.0004}, "rotation": []float64{0, 0, 0, 1}})

	for {
		if o, ok := node.World().Get("ball"); ok && o.Owner == engine.Identifier() {
			fmt.Println("the node has the engine's ball")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		if o := engine.Objects()["ball"]; !o.IsZero() {
			fmt.Println("the engine sees it at", string(o.Value("position")))
			return
		}
		select {
		case <-engine.Changed():
		case <-ctx.Done():
			fmt.Println("timed out")
			return
		}
	}
	// Output:
	// the node has the engine's ball
	// the engine sees it at [1,2,3]
}

// An engine in a big world wants only what is near its player: the tree
// next to it arrives, the tower a kilometre away does not.
func ExampleClient_SetInterest() {
	node, _ := relay.New(relay.Options{})
	defer node.Close(context.Background())
	srv, err := snapshot.Listen(node, "127.0.0.1:0", snapshot.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	node.Apply([]gameworld.Change{
		{Type: gameworld.Add, ID: "tree", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage("[3,0,4]")})},
		{Type: gameworld.Add, ID: "tower", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage("[1000,0,0]")})},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	player := [3]float64{0, 0, 0}
	engine, err := snapshot.Dial(ctx, srv.Addr().String(), snapshot.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	if err := engine.SetInterest(snapshot.Interest{Boxes: []peer.Box{{
		Min: [3]float64{player[0] - 50, player[1] - 50, player[2] - 50},
		Max: [3]float64{player[0] + 50, player[1] + 50, player[2] + 50}}}}); err != nil {
		panic(err)
	}
	for {
		objs := engine.Objects()
		if _, tower := objs["tower"]; !tower && len(objs) == 1 {
			fmt.Println("the engine holds", slices.Collect(maps.Keys(objs)))
			return
		}
		select {
		case <-engine.Changed():
		case <-ctx.Done():
			fmt.Println("timed out")
			return
		}
	}
	// Output:
	// the engine holds [tree]
}
