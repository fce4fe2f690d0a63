package peer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

func rec(t gameworld.ChangeType, id string, kv ...string) *Record {
	var p gameworld.Properties
	if t != gameworld.Remove {
		p = gameworld.Properties{}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = json.RawMessage(kv[i+1])
		}
	}
	return NewRecord(gameworld.Change{Type: t, ID: id, Owner: "w", Properties: p}, slotOf(id))
}

// slotOf gives each test id a fixed slot.
func slotOf(id string) uint32 {
	var h uint32
	for _, c := range id {
		h = h*31 + uint32(c)
	}
	return h % 1024
}

func batchString(b *Batch) string {
	part := func(rs []*Record) string {
		var s []string
		for _, r := range rs {
			s = append(s, string(r.Encoded()))
		}
		return strings.Join(s, ",")
	}
	out := part(b.First)
	if len(b.Second) > 0 {
		out += " | " + part(b.Second)
	}
	return strings.ReplaceAll(strings.ReplaceAll(out, `"owner":"w",`, ""), `,"owner":"w"`, "")
}

func TestQueueCoalescing(t *testing.T) {
	add, upd, rem := gameworld.Add, gameworld.Update, gameworld.Remove
	full := func(id string) func() *Record {
		return func() *Record { return rec(add, id, "full", "true") }
	}
	tests := []struct {
		name  string
		known []string
		push  []*Record
		want  string
	}{
		{"add+update is add", nil, []*Record{rec(add, "a", "x", "1"), rec(upd, "a", "y", "2")},
			`{"type":"add","id":"a","properties":{"x":1,"y":2}}`},
		{"update+update merges", []string{"a"}, []*Record{rec(upd, "a", "x", "1"), rec(upd, "a", "y", "2")},
			`{"type":"update","id":"a","properties":{"x":1,"y":2}}`},
		{"update+update same keys keeps latest", []string{"a"}, []*Record{rec(upd, "a", "x", "1"), rec(upd, "a", "x", "2")},
			`{"type":"update","id":"a","properties":{"x":2}}`},
		{"add+remove is nothing", nil, []*Record{rec(add, "a", "x", "1"), rec(rem, "a")}, ``},
		{"update+remove is remove", []string{"a"}, []*Record{rec(upd, "a", "x", "1"), rec(rem, "a")},
			`{"type":"remove","id":"a"}`},
		{"known add+remove is remove", []string{"a"}, []*Record{rec(add, "a", "x", "1"), rec(rem, "a")},
			`{"type":"remove","id":"a"}`},
		{"remove+add goes in two messages", []string{"a"}, []*Record{rec(rem, "a"), rec(add, "a", "x", "1")},
			`{"type":"remove","id":"a"} | {"type":"add","id":"a","properties":{"x":1}}`},
		{"remove+add+remove is remove", []string{"a"}, []*Record{rec(rem, "a"), rec(add, "a"), rec(rem, "a")},
			`{"type":"remove","id":"a"}`},
		{"remove of unknown id is dropped", nil, []*Record{rec(rem, "a")}, ``},
		{"update of unknown id becomes full add", nil, []*Record{rec(upd, "a", "x", "1")},
			`{"type":"add","id":"a","properties":{"full":true}}`},
		{"order is first push order", nil, []*Record{rec(add, "b"), rec(add, "a"), rec(upd, "b", "z", "1")},
			`{"type":"add","id":"b","properties":{"z":1}},{"type":"add","id":"a","properties":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q Queue
			for _, id := range tt.known {
				q.MarkKnown(slotOf(id), id)
			}
			for _, r := range tt.push {
				q.Push(r, full(r.ID))
			}
			var b Batch
			q.Drain(&b)
			if got := batchString(&b); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if q.Len() != 0 {
				t.Fatal("queue not empty after drain")
			}
		})
	}
}

// A stalled link keeps one entry per object however many changes arrive.
func TestQueueBoundedByObjects(t *testing.T) {
	var q Queue
	for i := 0; i < 100000; i++ {
		id := fmt.Sprintf("obj-%d", i%50)
		q.Push(rec(gameworld.Add, id, "i", fmt.Sprint(i)), nil)
	}
	if q.Len() != 50 {
		t.Fatalf("queue holds %d entries, want 50", q.Len())
	}
	coalesced, _ := q.Counters()
	if coalesced != 100000-50 {
		t.Fatalf("coalesced = %d", coalesced)
	}
	var b Batch
	q.Drain(&b)
	if len(b.First) != 50 || !strings.Contains(string(b.First[0].Encoded()), `"i":99950`) {
		t.Fatalf("drain kept stale state: %s", b.First[0].Encoded())
	}
}

// A slot reused by a new object while the old object's remove is still
// queued: both go out, the remove first.
func TestQueueSlotReuse(t *testing.T) {
	var q Queue
	q.MarkKnown(7, "old")
	q.Push(NewRecord(gameworld.Change{Type: gameworld.Remove, ID: "old", Owner: "w"}, 7), nil)
	q.Push(NewRecord(gameworld.Change{Type: gameworld.Add, ID: "new", Owner: "w", Properties: gameworld.Properties{}}, 7), nil)
	var b Batch
	q.Drain(&b)
	if got := batchString(&b); got != `{"type":"remove","id":"old"},{"type":"add","id":"new","properties":{}}` {
		t.Fatalf("got %s", got)
	}
	if !q.Knows(7, "new") || q.Knows(7, "old") {
		t.Fatal("known state wrong after reuse")
	}
	// A remove of the old id now is of an unknown object: dropped.
	q.Push(NewRecord(gameworld.Change{Type: gameworld.Remove, ID: "old", Owner: "w"}, 7), nil)
	if q.Len() != 0 {
		t.Fatal("remove of an object the peer does not know was queued")
	}
}
