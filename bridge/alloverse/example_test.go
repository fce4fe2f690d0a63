package alloverse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/solipsism/mesh/bridge/alloverse"
	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"
)

// An Alloverse client follows a Solipsism world: a ball created by a
// Solipsism client is an entity of its document, and its avatar is an
// object of the Solipsism world.
func ExampleDialClient() {
	node, _ := relay.New(relay.Options{})
	bridge, _ := alloverse.New(node, alloverse.Options{PlaceName: "garden"})
	mux := http.NewServeMux()
	mux.Handle("/ws", node)
	mux.Handle("/alloverse", bridge.Handler(alloverse.HandlerOptions{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer node.Close(context.Background())
	defer bridge.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sol, _ := client.Dial(ctx, url+"/ws", client.Options{})
	defer sol.Close()
	ball, _ := sol.Create(map[string]any{"geometry": "sphere"})

	allo, err := alloverse.DialClient(ctx, url+"/alloverse", alloverse.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer allo.Close()
	avatar, _, err := allo.Announce(ctx, map[string]any{"geometry": "avatar"})
	if err != nil {
		panic(err)
	}
	for {
		doc, _, _ := allo.Document()
		var d struct {
			Entities map[string]struct {
				Components map[string]json.RawMessage `json:"components"`
			} `json:"entities"`
		}
		json.Unmarshal(doc, &d)
		_, seesAvatar := sol.World().Get(avatar)
		if e, ok := d.Entities[ball]; ok && seesAvatar {
			fmt.Println("the Alloverse client sees a", string(e.Components["geometry"]))
			fmt.Println("the Solipsism client sees the avatar")
			return
		}
		select {
		case <-allo.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			fmt.Println("timed out")
			return
		}
	}
	// Output:
	// the Alloverse client sees a "sphere"
	// the Solipsism client sees the avatar
}
