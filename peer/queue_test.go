package peer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
)

func rec(t gameworld.ChangeType, id string, kv ...string) *Record {
	var p gameworld.Properties
	if t != gameworld.Remove {
		p = gameworld.PropertiesOf(map[string]json.RawMessage{})
		for i := 0; i+1 < len(kv); i += 2 {
			p = p.With(kv[i], json.RawMessage(kv[i+1]))
		}
	}
	return NewRecord(gameworld.Change{Type: t, ID: id, Owner: "w", Properties: p}, slotOf(id))
}

func transfer(id string, epoch uint64, kv ...string) *Record {
	r := rec(gameworld.Transfer, id, kv...)
	r.Epoch = epoch
	return r
}

func answer(id string, epoch uint64, kv ...string) *Record {
	r := transfer(id, epoch, kv...)
	r.Answer = true
	return r
}

func inSlot(r *Record, slot uint32) *Record {
	r.Slot = slot
	return r
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

// busyLink returns a link whose writer counts as busy, so that what is
// offered to it goes through its queue; it is never run.
func busyLink(known ...string) *Link {
	a, _ := Pipe()
	l := NewLink(a, newRecorder(), LinkOptions{})
	l.writing = true
	for _, id := range known {
		l.known.add(slotOf(id))
	}
	return l
}

func sendAll(int) Verdict { return Send }

// drainOutbox drains every queue in l's outbox into one batch.
func drainOutbox(l *Link) *Batch {
	var b Batch
	for _, it := range l.outbox {
		if it.q != nil {
			it.q.drain(&b)
		}
	}
	l.outbox = nil
	return &b
}

func TestQueueCoalescing(t *testing.T) {
	add, upd, rem := gameworld.Add, gameworld.Update, gameworld.Remove
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
		{"answer+update stays an answer", []string{"a"}, []*Record{answer("a", 2, "x", "1"), rec(upd, "a", "y", "2")},
			`{"type":"transfer","id":"a","epoch":2,"answer":true,"properties":{"x":1,"y":2}}`},
		{"answer+transfer stays an answer", []string{"a"}, []*Record{answer("a", 2, "x", "1"), transfer("a", 3, "x", "5")},
			`{"type":"transfer","id":"a","epoch":3,"answer":true,"properties":{"x":5}}`},
		{"add+answer stays an answer", nil, []*Record{rec(add, "a", "x", "1"), answer("a", 2, "x", "2")},
			`{"type":"transfer","id":"a","epoch":2,"answer":true,"properties":{"x":2}}`},
		{"add+transfer is an add", nil, []*Record{rec(add, "a", "x", "1"), transfer("a", 2, "x", "2")},
			`{"type":"add","id":"a","epoch":2,"properties":{"x":2}}`},
		{"answer of an unknown object stays an answer", nil, []*Record{answer("a", 1)},
			`{"type":"transfer","id":"a","epoch":1,"answer":true,"properties":{}}`},
		{"transfer of an unknown object is an add", nil, []*Record{transfer("a", 1)},
			`{"type":"add","id":"a","epoch":1,"properties":{}}`},
		{"remove+add in another slot goes in two messages", []string{"a"}, []*Record{rec(rem, "a"), inSlot(rec(add, "a", "x", "1"), 999)},
			`{"type":"remove","id":"a"} | {"type":"add","id":"a","properties":{"x":1}}`},
		{"add after a remove, in the slot of one removed", []string{"a", "b"}, []*Record{rec(rem, "b"), rec(rem, "a"), inSlot(rec(add, "a", "x", "1"), slotOf("b"))},
			`{"type":"remove","id":"b"},{"type":"remove","id":"a"} | {"type":"add","id":"a","properties":{"x":1}}`},
		{"order is first push order", nil, []*Record{rec(add, "b"), rec(add, "a"), rec(upd, "b", "z", "1")},
			`{"type":"add","id":"b","properties":{"z":1}},{"type":"add","id":"a","properties":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := busyLink(tt.known...)
			l.transfers.Store(true) // a peer that speaks transfers
			l.Offer(tt.push, sendAll, func(i int) *Record { return rec(add, tt.push[i].ID, "full", "true") }, false)
			b := drainOutbox(l)
			if got := batchString(b); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if l.Queued() != 0 {
				t.Fatal("queue not empty after drain")
			}
		})
	}
}

// A stalled link keeps one entry per object however many changes arrive.
func TestQueueBoundedByObjects(t *testing.T) {
	l := busyLink()
	for i := 0; i < 100000; i++ {
		id := fmt.Sprintf("obj-%d", i%50)
		l.Offer([]*Record{rec(gameworld.Add, id, "i", fmt.Sprint(i))}, sendAll, nil, true)
	}
	if l.Queued() != 50 {
		t.Fatalf("queue holds %d entries, want 50", l.Queued())
	}
	coalesced, _ := l.Counters()
	if coalesced != 100000-50 {
		t.Fatalf("coalesced = %d", coalesced)
	}
	b := drainOutbox(l)
	if len(b.First) != 50 || !strings.Contains(string(b.First[0].Encoded()), `"i":99950`) {
		t.Fatalf("drain kept stale state: %s", b.First[0].Encoded())
	}
}

// A slot reused by a new object while the old object's remove is still
// queued: both go out, the remove first.
func TestQueueSlotReuse(t *testing.T) {
	l := busyLink()
	l.known.add(7)
	l.Offer([]*Record{
		NewRecord(gameworld.Change{Type: gameworld.Remove, ID: "old", Owner: "w"}, 7),
		NewRecord(gameworld.Change{Type: gameworld.Add, ID: "new", Owner: "w", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{})}, 7),
	}, sendAll, nil, false)
	b := drainOutbox(l)
	if got := batchString(b); got != `{"type":"remove","id":"old"},{"type":"add","id":"new","properties":{}}` {
		t.Fatalf("got %s", got)
	}
	if !l.known.has(7) {
		t.Fatal("the new object is not known after reuse")
	}
}

// What a peer sent itself (Echo) is known without being sent back, and
// what is not for it (Skip) is not sent.
func TestOfferVerdicts(t *testing.T) {
	l := busyLink()
	recs := []*Record{rec(gameworld.Add, "mine"), rec(gameworld.Add, "theirs"), rec(gameworld.Add, "secret")}
	l.Offer(recs, func(i int) Verdict { return []Verdict{Echo, Send, Skip}[i] }, nil, true)
	b := drainOutbox(l)
	if got := batchString(b); got != `{"type":"add","id":"theirs","properties":{}}` {
		t.Fatalf("got %s", got)
	}
	if !l.known.has(slotOf("mine")) || l.known.has(slotOf("secret")) {
		t.Fatal("known set wrong")
	}
	// A remove of its own object is not echoed; of the skipped one never sent.
	l.Offer([]*Record{rec(gameworld.Remove, "mine"), rec(gameworld.Remove, "secret")}, sendAll, nil, true)
	b = drainOutbox(l)
	if got := batchString(b); got != `{"type":"remove","id":"mine"}` {
		t.Fatalf("got %s", got)
	}
}

// A remove the peer makes itself (Forget) is not sent, and drops what is
// still queued for the object, in every queue of the outbox; other
// objects' changes and the control messages between go out as they were.
func TestOfferForget(t *testing.T) {
	l := busyLink()
	l.known.add(slotOf("sent"))
	l.Offer([]*Record{rec(gameworld.Add, "a"), rec(gameworld.Update, "sent")}, sendAll, nil, true)
	l.SendDigest(Digest{Buckets: []uint64{0}})
	l.Offer([]*Record{rec(gameworld.Add, "b"), rec(gameworld.Add, "other")}, sendAll, nil, true)
	l.Offer([]*Record{rec(gameworld.Remove, "a"), rec(gameworld.Remove, "sent"), rec(gameworld.Remove, "b")},
		func(int) Verdict { return Forget }, nil, true)
	var got []string
	for _, it := range l.outbox {
		var b Batch
		if it.q != nil {
			it.q.drain(&b)
		}
		if len(it.msgs) > 0 {
			got = append(got, "digest")
		}
		if s := batchString(&b); s != "" {
			got = append(got, s)
		}
	}
	if want := []string{"digest", `{"type":"add","id":"other","properties":{}}`}; !slices.Equal(got, want) {
		t.Fatalf("outbox: %q, want %q", got, want)
	}
	for _, id := range []string{"a", "sent", "b"} {
		if l.known.has(slotOf(id)) {
			t.Fatalf("%s still known", id)
		}
	}
	if !l.known.has(slotOf("other")) {
		t.Fatal("other not known")
	}
}

func TestSlotSetGivesMemoryBack(t *testing.T) {
	var s slotSet
	for i := uint32(0); i < 300000; i++ {
		s.add(i)
	}
	for i := uint32(299999); i >= 10; i-- {
		s.remove(i)
	}
	if s.len() != 10 || cap(s) > 64 {
		t.Fatalf("after the flood left: %d slots in a set of capacity %d words", s.len(), cap(s))
	}
}

// owned is an add of id by owner in slot.
func owned(owner, id string, slot uint32) *Record {
	return NewRecord(gameworld.Change{Type: gameworld.Add, ID: id, Owner: owner, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"x": json.RawMessage("1")})}, slot)
}

func ids(rs []*Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Type.String()+" "+r.ID)
	}
	return out
}

// TestDrainSlice: a queue that fell behind by a burst goes a slice at a
// time; live changes of other owners go first, the bulk oldest first; the
// protocol's order holds across slices.
func TestDrainSlice(t *testing.T) {
	const max = 4
	t.Run("live changes overtake the bulk", func(t *testing.T) {
		var q queue
		var known slotSet
		for i := range 20 {
			q.push(owned("flood", fmt.Sprint("f", i), uint32(i)), &known)
		}
		q.push(owned("alice", "a", 100), &known)
		var b Batch
		if !q.drainSlice(&b, max) {
			t.Fatal("nothing left after the first slice")
		}
		if got := ids(b.First); fmt.Sprint(got) != "[add a add f0 add f1 add f2]" {
			t.Fatalf("first slice %v", got)
		}
		b.reset()
		// Arrives while the bulk is pending: next slice, first.
		q.push(owned("bob", "b", 101), &known)
		// A pending bulk entry changed again is live too.
		q.push(NewRecord(gameworld.Change{Type: gameworld.Update, ID: "f19", Owner: "flood", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"x": json.RawMessage("2")})}, 19), &known)
		q.drainSlice(&b, max)
		if got := ids(b.First); fmt.Sprint(got) != "[add b add f19 add f3 add f4]" {
			t.Fatalf("second slice %v", got)
		}
		b.reset()
		n := 8
		for q.drainSlice(&b, max) {
			n += len(b.First)
			b.reset()
		}
		n += len(b.First)
		if n != 22 || q.len() != 0 {
			t.Fatalf("sent %d records in all, %d left; want 22, 0", n, q.len())
		}
	})
	t.Run("an add and the remove that follows cancel out while pending", func(t *testing.T) {
		var q queue
		var known slotSet
		for i := range 20 {
			q.push(owned("flood", fmt.Sprint("f", i), uint32(i)), &known)
		}
		var b Batch
		q.drainSlice(&b, max) // f0..f3 sent: known
		b.reset()
		for i := range 20 {
			q.push(NewRecord(gameworld.Change{Type: gameworld.Remove, ID: fmt.Sprint("f", i), Owner: "flood"}, uint32(i)), &known)
		}
		var sent []string
		for more := true; more; b.reset() {
			more = q.drainSlice(&b, max)
			sent = append(sent, ids(b.First)...)
		}
		if fmt.Sprint(sent) != "[remove f0 remove f1 remove f2 remove f3]" {
			t.Fatalf("sent %v; want only the removes of what the peer was sent", sent)
		}
	})
	t.Run("a remove goes with or before the add of its id in another slot", func(t *testing.T) {
		var q queue
		var known slotSet
		q.push(owned("w", "x", 1), &known)
		var b Batch
		q.drain(&b) // the peer knows x in slot 1
		b.reset()
		for i := range 10 {
			q.push(owned("flood", fmt.Sprint("f", i), uint32(10+i)), &known)
		}
		q.push(NewRecord(gameworld.Change{Type: gameworld.Remove, ID: "x", Owner: "w"}, 1), &known)
		q.push(owned("w", "x", 50), &known) // back, in another slot
		var msgs [][]string
		for more := true; more; b.reset() {
			more = q.drainSlice(&b, max)
			msgs = append(msgs, ids(b.First))
			if len(b.Second) > 0 {
				msgs = append(msgs, ids(b.Second))
			}
		}
		removed, added := -1, -1
		for i, m := range msgs {
			for _, r := range m {
				switch r {
				case "remove x":
					removed = i
				case "add x":
					added = i
				}
			}
		}
		if removed < 0 || added <= removed {
			t.Fatalf("messages %v: the remove of x must come in a message before its add", msgs)
		}
	})
	t.Run("the refresh marker goes with the last entry queued before it", func(t *testing.T) {
		var q queue
		var known slotSet
		for i := range 10 {
			q.push(owned("w", fmt.Sprint("r", i), uint32(i)), &known)
		}
		q.markRefreshed()
		var b Batch
		var marks []bool
		for more := true; more; b.reset() {
			more = q.drainSlice(&b, max)
			marks = append(marks, b.Refreshed)
			// Live changes keep coming; they do not hold the marker back.
			q.push(owned("live", fmt.Sprint("l", len(marks)), uint32(100+len(marks))), &known)
			if len(marks) > 10 {
				break
			}
		}
		if fmt.Sprint(marks[:3]) != "[false false true]" {
			t.Fatalf("markers by slice %v; want the third slice (r8, r9) marked", marks)
		}
	})
}

func TestSpread(t *testing.T) {
	owners := func(os ...string) []*Record {
		var rs []*Record
		for i, o := range os {
			r := rec(gameworld.Update, fmt.Sprintf("o%d", i), "n", "1")
			r.Owner = o
			rs = append(rs, r)
		}
		return rs
	}
	run := func(o string, n int) []string { return slices.Repeat([]string{o}, n) }
	for _, tc := range []struct {
		name string
		recs []*Record
		want bool
	}{
		{"empty", nil, true},
		{"one", owners("a"), true},
		{"runs below the live bound", owners(slices.Concat(run("a", liveEntries), run("b", liveEntries), run("a", 3))...), true},
		{"a run at the bound", owners(slices.Concat(run("a", 2), run("b", liveEntries+1))...), false},
		{"alternating", owners(slices.Concat(slices.Repeat([]string{"a", "b"}, 100))...), true},
	} {
		if got := spread(tc.recs); got != tc.want {
			t.Errorf("%s: spread = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpreadTickInOrder: an idle link offered a tick of many peers'
// changes, more than a slice, takes them as they are: every record
// arrives, in order, a slice a message at most.
func TestSpreadTickInOrder(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: time.Millisecond})
	const n = 2*sliceEntries + 100
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = NewRecord(gameworld.Change{Type: gameworld.Add, ID: fmt.Sprintf("o%d", i), Owner: fmt.Sprintf("w%d", i/10),
			Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage("1")})}, uint32(i))
	}
	time.Sleep(5 * time.Millisecond) // due
	l.Offer(recs, sendAll, nil, true)
	next := 0
	for next < n {
		m := readMsg(t, far)
		if m.Type != TypeWorldChange {
			continue
		}
		var lim Limits
		wc, err := lim.DecodeWorldChange(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(wc.Changes) > sliceEntries {
			t.Errorf("a message of %d records", len(wc.Changes))
		}
		for _, c := range wc.Changes {
			if want := fmt.Sprintf("o%d", next); c.ID != want {
				t.Fatalf("record %d is %s, want %s", next, c.ID, want)
			}
			next++
		}
	}
}
