package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// worldChange encodes changes as a node sends them.
func worldChange(changes ...gameworld.Change) []byte {
	b := peer.AppendWorldChangeHeader(nil, 1700000000000)
	for i, c := range changes {
		if i > 0 {
			b = append(b, ',')
		}
		b = peer.AppendChange(b, c)
	}
	return peer.AppendWorldChangeTrailer(b, false)
}

func props(kv ...string) gameworld.Properties {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return gameworld.PropertiesOf(m)
}

// mirrors applies msgs with the scanner and with the decoder and returns
// both copies of the world.
func mirrors(msgs ...[]byte) (fast, slow map[string]string) {
	a := &client{world: map[string]string{}, st: &stats{}}
	b := &client{world: map[string]string{}, st: &stats{}}
	for _, m := range msgs {
		a.mirror(m)
		b.mirrorJSON(m)
	}
	return a.world, b.world
}

func TestMirror(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs [][]byte
		want map[string]string
	}{
		{"adds and updates", [][]byte{
			worldChange(gameworld.Change{Type: gameworld.Add, ID: "a", Owner: "o", Properties: props("position", "[1,2,3]", "t", "17")},
				gameworld.Change{Type: gameworld.Add, ID: "b", Owner: "o", Properties: props("cat", `"x"`)}),
			worldChange(gameworld.Change{Type: gameworld.Update, ID: "a", Owner: "o", Properties: props("t", "18", "timestamp", "5")}),
		}, map[string]string{"a": "18", "b": ""}},
		{"a remove", [][]byte{
			worldChange(gameworld.Change{Type: gameworld.Add, ID: "a", Owner: "o", Properties: props("t", "1")}),
			worldChange(gameworld.Change{Type: gameworld.Remove, ID: "a", Owner: "o"}),
		}, map[string]string{}},
		{"an escaped string goes to the decoder", [][]byte{
			worldChange(gameworld.Change{Type: gameworld.Add, ID: `q"uote`, Owner: "o", Properties: props("t", "-3")}),
		}, map[string]string{`q"uote`: "-3"}},
	} {
		fast, slow := mirrors(tc.msgs...)
		if !maps.Equal(fast, tc.want) || !maps.Equal(slow, tc.want) {
			t.Errorf("%s: scanned %v, decoded %v, want %v", tc.name, fast, slow, tc.want)
		}
	}
}

// FuzzMirror: whatever ids and values a node encodes, the scanner reads
// what the decoder does.
func FuzzMirror(f *testing.F) {
	f.Add("obj-1", int64(12), "update", `"red"`)
	f.Add("a\"b", int64(-1), "add", `{"t":1}`)
	f.Add("x", int64(0), "remove", `[1,2]`)
	f.Add("y", int64(4), "update", `{"type":"add","id":"z"}`)
	f.Add("y", int64(4), "update", `[{"type":"remove","id":"y","t":9}]`)
	f.Fuzz(func(t *testing.T, id string, tv int64, typ, other string) {
		if !json.Valid([]byte(other)) || strings.Contains(other, `"owner":`) {
			return // (an object with a type and an owner in properties: see mirror)
		}
		ct := map[string]gameworld.ChangeType{"add": gameworld.Add, "update": gameworld.Update, "remove": gameworld.Remove}[typ]
		c := gameworld.Change{Type: ct, ID: id, Owner: "o"}
		if ct != gameworld.Remove {
			c.Properties = props("other", other, "t", fmt.Sprint(tv))
		}
		fast, slow := mirrors(worldChange(gameworld.Change{Type: gameworld.Add, ID: id, Owner: "o", Properties: props("t", "0")}), worldChange(c))
		if !maps.Equal(fast, slow) {
			t.Fatalf("scanned %v, decoded %v", fast, slow)
		}
	})
}

// TestBlockOf: clients are dealt to nodes in contiguous blocks of the
// grid, as near square as the number of nodes allows, none empty and
// none more than its share of rows by its share of columns.
func TestBlockOf(t *testing.T) {
	for _, tc := range []struct {
		n, side, parts int
		down, across   int
	}{
		{600, 25, 1, 1, 1}, {600, 25, 2, 2, 1}, {600, 25, 4, 2, 2}, {600, 25, 6, 3, 2},
		{1000, 32, 4, 2, 2}, {1000, 32, 3, 3, 1}, {100, 10, 9, 3, 3}, {7, 3, 4, 0, 0},
	} {
		count := make([]int, tc.parts)
		rows := (tc.n + tc.side - 1) / tc.side
		for i := range tc.n {
			b := blockOf(i, tc.n, tc.side, tc.parts)
			if b < 0 || b >= tc.parts {
				t.Fatalf("%+v: client %d in block %d", tc, i, b)
			}
			count[b]++
			// Its block is where its row and column fall (down 0: too
			// few rows for blocks, runs of clients).
			want := i * tc.parts / tc.n
			if tc.down > 0 {
				want = (i/tc.side*tc.down/rows)*tc.across + (i%tc.side)*tc.across/tc.side
			}
			if b != want {
				t.Fatalf("%+v: client %d in block %d, want %d", tc, i, b, want)
			}
		}
		most := (tc.n + tc.parts - 1) / tc.parts
		if tc.down > 0 {
			most = ((rows + tc.down - 1) / tc.down) * ((tc.side + tc.across - 1) / tc.across)
		}
		for b, c := range count {
			if c == 0 || c > most {
				t.Errorf("%+v: block %d serves %d clients of %d (at most %d)", tc, b, c, tc.n, most)
			}
		}
	}
}
