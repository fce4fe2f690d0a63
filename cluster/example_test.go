package cluster_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"
)

// serve runs n behind a real HTTP server on 127.0.0.1 and returns its
// ws:// URL and a function that stops both.
func serve(n *relay.Node) (url string, stop func()) {
	srv := httptest.NewServer(n)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), func() {
		srv.Close()
		n.Close(context.Background())
	}
}

// until polls cond every 10 ms for up to 10 s.
func until(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// Two servers in a mesh (memberlist on loopback): a client of each sees
// what the other's creates.
func ExampleJoin() {
	a, _ := relay.New(relay.Options{})
	urlA, stopA := serve(a)
	defer stopA()
	b, _ := relay.New(relay.Options{})
	urlB, stopB := serve(b)
	defer stopB()
	ma, err := cluster.Join(a, cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: urlA, Profile: "local"})
	if err != nil {
		panic(err)
	}
	defer ma.Close()
	mb, err := cluster.Join(b, cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: urlB, Profile: "local", Join: []string{ma.Addr()}})
	if err != nil {
		panic(err)
	}
	defer mb.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, urlA, client.Options{Prefix: "alice"})
	if err != nil {
		panic(err)
	}
	defer alice.Close()
	bob, err := client.Dial(ctx, urlB, client.Options{Prefix: "bob"})
	if err != nil {
		panic(err)
	}
	defer bob.Close()
	ball, _ := bob.Create(map[string]any{"kind": "ball"})
	seen := until(func() bool { _, ok := alice.World().Get(ball); return ok })
	fmt.Println("alice, on the other member, sees bob's ball:", seen)
	// Output: alice, on the other member, sees bob's ball: true
}
