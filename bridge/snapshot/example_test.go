package snapshot_test

import (
	"context"
	"fmt"
	"time"

	"github.com/solipsism/mesh/bridge/snapshot"
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
