package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
)

// TestBigRefreshInSlices: peers join a world of 30,000 objects (a refresh
// answer of several slices, each from the world as it is then) while its
// owner keeps updating, removing and adding objects; each ends with the
// node's world, a 2016-style peer too (it never hears where the answer
// ends).
func TestBigRefreshInSlices(t *testing.T) {
	n, url := startNode(t, relay.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owner := dialTick(t, ctx, url, 20*time.Millisecond)
	const objects = 3*relay.RefreshSlice + 1000
	changes := make([]gameworld.Change, 0, objects)
	for k := range objects {
		changes = append(changes, gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("big-%06d", k), Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": []byte("0")})})
	}
	if _, err := owner.Node().Apply(changes); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node holds the world", time.Minute, func() bool { return n.World().Len() == objects })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			id := fmt.Sprintf("big-%06d", (i*7919)%objects)
			switch i % 10 {
			case 0:
				owner.Node().Apply([]gameworld.Change{{Type: gameworld.Remove, ID: id}})
			case 1:
				owner.Node().Apply([]gameworld.Change{{Type: gameworld.Add, ID: id, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": []byte(fmt.Sprint(i))})}})
			default:
				owner.Node().Apply([]gameworld.Change{{Type: gameworld.Update, ID: id, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": []byte(fmt.Sprint(i))})}})
			}
		}
	}()
	var joiners []*client.Client
	for range 3 {
		joiners = append(joiners, dialTick(t, ctx, url, 20*time.Millisecond))
		time.Sleep(30 * time.Millisecond)
	}
	legacy := wiretest.Dial(t, url, "legacy-LLLLLLLL-LLLLLLLL", wiretest.Options{})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	for i, j := range joiners {
		sameWorld(t, fmt.Sprintf("joiner %d", i), n, j)
	}
	legacy.Wait("the 2016 peer's view", 30*time.Second, func(objs map[string]wiretest.Object) bool { return len(objs) == n.World().Len() })
	legacy.CheckClean()
}
