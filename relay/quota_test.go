package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// TestQuotas: each quota tripped on purpose refuses the offender's writes
// (or connection, or reads it slower) and leaves others alone.
func TestQuotas(t *testing.T) {
	n, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond, Quotas: relay.Quotas{
		ObjectsPerOwner: 3, PropertiesPerObject: 2, ValueBytes: 16, ObjectBytes: 40, ConnectionsPerIP: 4, MessagesPerSecond: 40,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	greedy := wiretest.Dial(t, url, c1ID, wiretest.Options{})
	other := wiretest.Dial(t, url, c2ID, wiretest.Options{})

	// present is one of greedy's objects in the world, for the subtests
	// that write it.
	present := "g0"
	t.Run("objects per owner", func(t *testing.T) {
		// Greedy's adds may arrive before its metadata (refused) and come
		// again in its refresh answer: which three get in depends on
		// that; that no more than three do does not.
		for i := range 5 {
			greedy.Change(wiretest.Add(fmt.Sprintf("g%d", i), c1ID, props{"n": i}))
		}
		other.Change(wiretest.Add("o0", c2ID, props{"n": 0}))
		waitFor(t, "o0", 5*time.Second, func() bool { _, ok := n.World().Get("o0"); return ok })
		var in []string
		waitFor(t, "three of greedy's objects", 5*time.Second, func() bool {
			in = in[:0]
			for i := range 5 {
				if _, ok := n.World().Get(fmt.Sprintf("g%d", i)); ok {
					in = append(in, fmt.Sprintf("g%d", i))
				}
			}
			return len(in) >= 3
		})
		time.Sleep(100 * time.Millisecond)
		in = in[:0]
		for i := range 5 {
			if _, ok := n.World().Get(fmt.Sprintf("g%d", i)); ok {
				in = append(in, fmt.Sprintf("g%d", i))
			}
		}
		if len(in) != 3 {
			t.Errorf("greedy has %v in the world, want three (the quota)", in)
		}
		present = in[0]
		other.WaitHas(present)
	})
	t.Run("objects per owner, all in one message", func(t *testing.T) {
		// A refresh answer brings every object of a peer in one message.
		var owned []map[string]any
		for i := range 5 {
			owned = append(owned, wiretest.Add(fmt.Sprintf("h%d", i), "client-HOARDER0-HOARDER0", props{"n": i}))
		}
		wiretest.Dial(t, url, "client-HOARDER0-HOARDER0", wiretest.Options{Owned: owned})
		waitFor(t, "the hoarder's objects", 5*time.Second, func() bool {
			for i := range 5 {
				if _, ok := n.World().Get(fmt.Sprintf("h%d", i)); ok {
					return true
				}
			}
			return false
		})
		time.Sleep(50 * time.Millisecond)
		in := 0
		for i := range 5 {
			if _, ok := n.World().Get(fmt.Sprintf("h%d", i)); ok {
				in++
			}
		}
		if in != 3 {
			t.Errorf("%d of the hoarder's 5 objects are in the world, want the quota's 3", in)
		}
	})
	t.Run("property size, count and object size", func(t *testing.T) {
		other.Change(wiretest.Update("o0", c2ID, props{"big": strings.Repeat("x", 40)}))
		other.Change(wiretest.Update("o0", c2ID, props{"a": 1, "b": 2}))
		other.Change(wiretest.Add("o1", c2ID, props{"ok": "small"}))
		waitFor(t, "o1", 5*time.Second, func() bool { _, ok := n.World().Get("o1"); return ok })
		time.Sleep(50 * time.Millisecond)
		o, _ := n.World().Get("o0")
		if _, big := o.Properties.Get("big"); big || o.Properties.Len() > 2 {
			t.Errorf("o0 went over its quotas: %v", o.Properties)
		}
	})
	t.Run("connections per address", func(t *testing.T) {
		var conns []peer.Conn
		var refused error
		for range 4 {
			c, err := peer.Dial(ctx, url, peer.DialOptions{})
			if err != nil {
				refused = err
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.CloseNow()
		}
		var he *peer.HandshakeError
		if !errors.As(refused, &he) || he.StatusCode != 429 {
			t.Fatalf("a connection over the per-address limit: %v, want HTTP 429", refused)
		}
	})
	t.Run("message rate throttles, not others", func(t *testing.T) {
		start := time.Now()
		for i := range 80 {
			greedy.Change(wiretest.Update(present, c1ID, props{"n": i}))
		}
		other.Change(wiretest.Update("o1", c2ID, props{"ok": "quick"}))
		greedy.WaitProp("o1", "ok", `"quick"`)
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("a bystander's update took %s behind a throttled peer", d)
		}
		other.WaitProp(present, "n", "79")
		// 40 go at once (the burst), the other 40 at 40 per second: about
		// a second, less up to two tokens' time (25 ms each) of refill
		// while the burst is read and timer slack. Unthrottled, they take
		// milliseconds.
		if d := time.Since(start); d < 950*time.Millisecond {
			t.Errorf("80 messages at 40 per second took only %s", d)
		}
	})
}
