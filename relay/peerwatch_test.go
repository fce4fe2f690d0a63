package relay_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// roster is a PeerWatcher that keeps one object of the node's own, "roster",
// whose "count" is how many peers speak for their world here.
type roster struct{ peers map[any]bool }

func (r *roster) change() []gameworld.Change {
	props := gameworld.PropertiesOf(map[string]json.RawMessage{"count": json.RawMessage(strconv.Itoa(len(r.peers)))})
	return []gameworld.Change{{Type: gameworld.Add, ID: "roster", Properties: props}}
}

func (r *roster) PeerChanged(key any, md peer.Metadata) []gameworld.Change {
	if r.peers[key] {
		return nil
	}
	r.peers[key] = true
	// A watcher may only change the node's own objects: this one is
	// ignored.
	other := gameworld.Change{Type: gameworld.Add, ID: "forged", Owner: md.Identifier}
	return append(r.change(), other)
}

func (r *roster) PeerLeft(key any) []gameworld.Change {
	if !r.peers[key] {
		return nil
	}
	delete(r.peers, key)
	return r.change()
}

// TestPeerWatcher: a watcher in Options follows real peers joining and
// leaving, its changes are the node's own and reach every peer, and it
// cannot write another world's objects.
func TestPeerWatcher(t *testing.T) {
	r := &roster{peers: map[any]bool{}}
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond, PeerWatchers: []relay.PeerWatcher{r}})
	count := func() string {
		o, ok := n.World().Get("roster")
		if !ok {
			return "none"
		}
		if o.Owner != n.Identifier() {
			t.Fatalf("the roster is owned by %s, not the node", o.Owner)
		}
		return string(o.Properties.Value("count"))
	}
	var peers []*wiretest.Peer
	for i := range 3 {
		peers = append(peers, wiretest.Dial(t, url, fmt.Sprintf("client-%08d-roster00", i), wiretest.Options{}))
		want := strconv.Itoa(i + 1)
		waitFor(t, "the roster at "+want, 5*time.Second, func() bool { return count() == want })
	}
	peers[0].WaitProp("roster", "count", "3")
	peers[1].Close()
	waitFor(t, "the roster at 2", 5*time.Second, func() bool { return count() == "2" })
	peers[0].WaitProp("roster", "count", "2")
	if _, ok := n.World().Get("forged"); ok {
		t.Error("a watcher wrote an object of a peer's world")
	}
	for _, p := range peers {
		p.CheckClean()
	}
}
