package relay

import (
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// TestFoldDues: a due takes the place of its object's update in a
// message where both go as updates, sent if either would be whatever the
// peer knows; any other pair stays apart.
func TestFoldDues(t *testing.T) {
	rec := func(typ gameworld.ChangeType, id string, slot uint32) *peer.Record {
		return peer.NewRecord(gameworld.Change{Type: typ, ID: id, Owner: "w"}, slot)
	}
	tests := []struct {
		name         string
		entry, due   *peer.Record
		entryV, dueV peer.Verdict
		folded       bool
		want         peer.Verdict
	}{
		{"both sent", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Send, peer.Send, true, peer.Send},
		{"entry kept, due sent", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Keep, peer.Send, true, peer.Send},
		{"entry sent, due kept", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Send, peer.Keep, true, peer.Send},
		{"both kept", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Keep, peer.Keep, true, peer.Keep},
		{"entry revealed", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Reveal, peer.Send, false, 0},
		{"entry hidden", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Hide, peer.Send, false, 0},
		{"entry echoed", rec(gameworld.Update, "a", 1), rec(gameworld.Update, "a", 1), peer.Echo, peer.Send, false, 0},
		{"entry an add", rec(gameworld.Add, "a", 1), rec(gameworld.Update, "a", 1), peer.Send, peer.Send, false, 0},
		{"the slot another object's", rec(gameworld.Update, "b", 1), rec(gameworld.Update, "a", 1), peer.Send, peer.Send, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := rec(gameworld.Update, "x", 9)
			logged := []*peer.Record{other, tt.entry}
			dues := []*peer.Record{rec(gameworld.Update, "y", 8), tt.due}
			dueVs := []peer.Verdict{peer.Send, tt.dueV}
			entryVs := []peer.Verdict{peer.Send, tt.entryV}
			rest, folded := foldDues(logged, dues, dueVs, []int{1}, func(i int) peer.Verdict { return entryVs[i] })
			v, ok := folded[1]
			switch {
			case ok != tt.folded:
				t.Fatalf("folded %v, want %v (rest %v)", ok, tt.folded, rest)
			case ok && (v != tt.want || logged[1] != tt.due || len(rest) != 0):
				t.Fatalf("verdict %v, entry %p (the due %p), rest %v; want %v", v, logged[1], tt.due, rest, tt.want)
			case !ok && (logged[1] != tt.entry || len(rest) != 1 || rest[0] != 1):
				t.Fatalf("entry replaced or due lost: rest %v", rest)
			case logged[0] != other || len(folded) > 1:
				t.Fatalf("another entry touched: %v", folded)
			}
		})
	}
}
