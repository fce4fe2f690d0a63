package peer

import (
	"fmt"
	"slices"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

// TestAnnounceDuringBurst: while a link sends a burst of removes (world
// "gone" left), a chain announcement that drops "gone" and adds "joined"
// is written in two parts: at once with "joined" (and "gone" still
// listed), then without "gone" right after the burst's last remove; the
// joined world's object, offered after the announcement, overtakes the
// burst.
func TestAnnounceDuringBurst(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: Immediate, MaxFrameBytes: 1024})
	const n = 10000
	chain := func(ids ...string) Metadata {
		return Metadata{Identifier: "me", IdentifierChain: append([]string{"me"}, ids...)}
	}
	l.Announce(chain("gone"))
	adds := make([]*Record, n)
	for i := range adds {
		adds[i] = NewRecord(gameworld.Change{Type: gameworld.Add, ID: fmt.Sprint("g", i), Owner: "gone"}, uint32(i))
	}
	l.Offer(adds, sendAll, nil, true)
	var lim Limits
	type event struct {
		kind  string // "md", "remove", "add"
		chain []string
		id    string
	}
	var events []event
	read := func(until func() bool) {
		for !until() {
			m := readMsg(t, far)
			switch m.Type {
			case TypeMetadata, TypeMetadataChange:
				md, err := lim.DecodeMetadata(m.Data)
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, event{kind: "md", chain: md.IdentifierChain})
			case TypeWorldChange:
				wc, err := lim.DecodeWorldChange(m.Data)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range wc.Changes {
					events = append(events, event{kind: c.Type.String(), id: c.ID})
				}
			}
		}
	}
	count := func(kind string) int {
		k := 0
		for _, e := range events {
			if e.kind == kind {
				k++
			}
		}
		return k
	}
	read(func() bool { return count("add") == n })
	events = nil

	removes := make([]*Record, n)
	for i := range removes {
		removes[i] = NewRecord(gameworld.Change{Type: gameworld.Remove, ID: fmt.Sprint("g", i), Owner: "gone"}, uint32(i))
	}
	l.Offer(removes, sendAll, nil, true)
	l.Announce(chain("joined"))
	l.Offer([]*Record{NewRecord(gameworld.Change{Type: gameworld.Add, ID: "live", Owner: "joined"}, n+1)}, sendAll, nil, true)
	read(func() bool { return count("remove") == n && count("md") == 2 })

	mds, lastRemove, live := []int{}, -1, -1
	for i, e := range events {
		switch {
		case e.kind == "md":
			mds = append(mds, i)
		case e.kind == "remove":
			lastRemove = i
		case e.id == "live":
			live = i
		}
	}
	if len(mds) != 2 {
		t.Fatalf("%d metadata messages, want 2", len(mds))
	}
	first, second := events[mds[0]].chain, events[mds[1]].chain
	if !slices.Contains(first, "joined") || !slices.Contains(first, "gone") {
		t.Errorf("the first announcement lists %v, want joined and (not yet told gone) gone", first)
	}
	if !slices.Contains(second, "joined") || slices.Contains(second, "gone") {
		t.Errorf("the second announcement lists %v, want joined without gone", second)
	}
	if !(mds[0] < live && live < lastRemove && lastRemove < mds[1]) {
		t.Fatalf("order: joined announced at %d, its object at %d, last remove at %d, departure at %d", mds[0], live, lastRemove, mds[1])
	}
}
