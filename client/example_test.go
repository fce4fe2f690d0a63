package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
)

// A Go program joins a shared world, creates an object it owns, and watches
// another client's object appear and move.
func ExampleClient() {
	server, _ := relay.New(relay.Options{})
	srv := httptest.NewServer(server)
	defer srv.Close()
	defer server.Close(context.Background())
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice"})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	moved := make(chan string, 10)
	alice.Subscribe(func(e client.Event) {
		if e.Type != gameworld.Remove {
			moved <- string(e.Properties.Value("position"))
		}
	})

	bob, err := client.Dial(ctx, url, client.Options{Prefix: "bob"})
	if err != nil {
		panic(err)
	}
	defer bob.Close()
	ball, _ := bob.Create(map[string]any{"kind": "ball", "position": []int{0, 0, 0}})
	bob.Set(ball, map[string]any{"position": []int{0, 1, 0}})
	bob.Set(ball, map[string]any{"position": []int{0, 2, 0}})

	// Changes within one tick are coalesced: alice may see the ball
	// appear already at its latest position.
	for {
		select {
		case p := <-moved:
			if p == "[0,2,0]" {
				o, _ := alice.World().Get(ball)
				fmt.Println("alice sees bob's", string(o.Properties.Value("kind")), "at", p)
				return
			}
		case <-ctx.Done():
			fmt.Println("timed out")
			return
		}
	}
	// Output: alice sees bob's "ball" at [0,2,0]
}

// Rooms narrow what a client sees: alice, in the lobby, sees the lobby's
// chair and not the hall's lamp.
func ExampleClient_SetRooms() {
	node, _ := relay.New(relay.Options{})
	srv := httptest.NewServer(node)
	defer srv.Close()
	defer node.Close(context.Background())
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice", Rooms: []string{"lobby"}})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	bob, err := client.Dial(ctx, url, client.Options{Prefix: "bob"})
	if err != nil {
		panic(err)
	}
	defer bob.Close()
	lamp, _ := bob.Create(map[string]any{"kind": "lamp", "room": "hall"})
	for _, ok := node.World().Get(lamp); !ok && ctx.Err() == nil; _, ok = node.World().Get(lamp) {
		time.Sleep(10 * time.Millisecond)
	}
	chair, _ := bob.Create(map[string]any{"kind": "chair", "room": "lobby"})
	for _, ok := alice.World().Get(chair); !ok && ctx.Err() == nil; _, ok = alice.World().Get(chair) {
		time.Sleep(10 * time.Millisecond)
	}
	_, seesLamp := alice.World().Get(lamp)
	fmt.Println("alice sees the chair; the lamp:", seesLamp)
	// Output: alice sees the chair; the lamp: false
}
