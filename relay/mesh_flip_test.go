package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/relay"
)

// TestMemberFlipsDuringBursts: member a's clients come and go, so the
// interest a announces to member b flips between nothing (no client) and
// everything, while bursts of positioned objects enter b and leave it. At
// the end a holds b's world, a last client holds a's, and no member
// repaired anything (the nodes' cleanup fails the test on a repair).
func TestMemberFlipsDuringBursts(t *testing.T) {
	nodes := startMeshWith(t, 2, cluster.Options{}, relay.Options{Tick: 10 * time.Millisecond})
	a, b := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	flipped := make(chan int)
	go func() {
		n := 0
		defer func() { flipped <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(5+rand.IntN(60)) * time.Millisecond):
			}
			c, err := client.Dial(ctx, a.url, client.Options{Tick: 10 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
			c.Close()
			n++
		}
	}()
	for round := range 6 {
		p := sendBurst(t, b.url, fmt.Sprintf("burst-%08d-memberflip", round), 6000)
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		if round%2 == 0 {
			p.Close()
		}
	}
	close(stop)
	t.Logf("a's clients came and went %d times", <-flipped)
	last := dialTick(t, ctx, a.url, 10*time.Millisecond)
	var diff string
	if !await(60*time.Second, func() bool {
		if diff = worldDiff(a.node.World(), b.node.World()); diff != "" {
			diff = "a and b: " + diff
		} else if diff = worldDiff(last.World(), a.node.World()); diff != "" {
			diff = "the last client and a: " + diff
		}
		return diff == ""
	}) {
		// What each member believes of the other's link, for the record.
		for _, mn := range []*meshNode{a, b} {
			for _, l := range mn.node.Links() {
				interest := "everything"
				if l.Interest != nil {
					interest = fmt.Sprint(*l.Interest)
				}
				t.Logf("%s: link %s %s interest=%s queued=%d ready=%v", mn.node.Identifier(), l.Kind, l.Identifier, interest, l.Queued, l.Ready)
			}
		}
		t.Fatal(diff)
	}
	time.Sleep(4 * testDigestInterval) // digests compare the settled views
}
