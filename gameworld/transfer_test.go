package gameworld

import (
	"encoding/json"
	"testing"
)

func TestBeats(t *testing.T) {
	tests := []struct {
		name     string
		epoch    uint64
		owner    string
		curEpoch uint64
		curOwner string
		want     bool
	}{
		{"higher epoch", 3, "a", 2, "z", true},
		{"lower epoch", 1, "z", 2, "a", false},
		{"tie, greater owner", 2, "b", 2, "a", true},
		{"tie, lesser owner", 2, "a", 2, "b", false},
		{"the same claim", 2, "a", 2, "a", false},
		{"epoch 0 never wins", 0, "z", 0, "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Beats(tt.epoch, tt.owner, tt.curEpoch, tt.curOwner); got != tt.want {
				t.Fatalf("Beats = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTransfer(t *testing.T) {
	props := func(s string) Properties {
		var p map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			t.Fatal(err)
		}
		return PropertiesOf(p)
	}
	t.Run("a request takes the next epoch and keeps the properties", func(t *testing.T) {
		w := New("w")
		w.Apply([]Change{{Type: Add, ID: "ball", Owner: "alice", Properties: props(`{"x":1}`)}}, nil)
		res := w.Apply([]Change{{Type: Transfer, ID: "ball", Owner: "bob"}}, nil)
		o, _ := w.Get("ball")
		if len(res.Records) != 1 || res.Records[0].Type != Transfer || res.Records[0].PrevOwner != "alice" || res.Records[0].Epoch != 1 {
			t.Fatalf("records %+v", res.Records)
		}
		if o.Owner != "bob" || o.Epoch != 1 || string(o.Properties.Value("x")) != "1" || string(res.Records[0].Properties.Value("x")) != "1" {
			t.Fatalf("object %+v", o)
		}
	})
	t.Run("a claim with properties replaces them", func(t *testing.T) {
		w := New("w")
		w.Apply([]Change{{Type: Add, ID: "ball", Owner: "alice", Properties: props(`{"x":1,"y":2}`)}}, nil)
		w.Apply([]Change{{Type: Transfer, ID: "ball", Owner: "bob", Epoch: 5, Properties: props(`{"x":3}`)}}, nil)
		o, _ := w.Get("ball")
		if o.Owner != "bob" || o.Epoch != 5 || o.Properties.Len() != 1 || string(o.Properties.Value("x")) != "3" {
			t.Fatalf("object %+v", o)
		}
	})
	t.Run("an add whose claim wins is a transfer", func(t *testing.T) {
		w := New("w")
		w.Apply([]Change{{Type: Add, ID: "ball", Owner: "alice", Epoch: 2, Properties: props(`{"x":1}`)}}, nil)
		res := w.Apply([]Change{{Type: Add, ID: "ball", Owner: "bob", Epoch: 3, Properties: props(`{"x":2}`)}}, nil)
		if o, _ := w.Get("ball"); o.Owner != "bob" || res.Records[0].Type != Transfer {
			t.Fatalf("object %+v, records %+v", o, res.Records)
		}
		res = w.Apply([]Change{{Type: Add, ID: "ball", Owner: "carol", Epoch: 1, Properties: props(`{"x":9}`)}}, nil)
		if o, _ := w.Get("ball"); o.Owner != "bob" || string(o.Properties.Value("x")) != "9" || res.Records[0].Type != Update {
			t.Fatalf("a losing add changed the owner: %+v", o)
		}
	})
	t.Run("a transfer of an unknown object", func(t *testing.T) {
		w := New("w")
		if res := w.Apply([]Change{{Type: Transfer, ID: "ball", Owner: "bob"}}, nil); len(res.Refused) != 1 {
			t.Fatalf("a bare request for an unknown object: %+v", res)
		}
		res := w.Apply([]Change{{Type: Transfer, ID: "ball", Owner: "bob", Epoch: 4, Properties: props(`{"x":1}`)}}, nil)
		if o, ok := w.Get("ball"); !ok || o.Owner != "bob" || o.Epoch != 4 || res.Records[0].Type != Add {
			t.Fatalf("a whole transfer of an unknown object is its add: %+v %+v", o, res.Records)
		}
	})
	t.Run("an update after a transfer in one batch folds into it", func(t *testing.T) {
		w := New("w")
		w.Apply([]Change{{Type: Add, ID: "ball", Owner: "alice", Properties: props(`{"x":1}`)}}, nil)
		res := w.Apply([]Change{{Type: Transfer, ID: "ball", Owner: "bob"}, {Type: Update, ID: "ball", Properties: props(`{"x":2}`)}}, nil)
		if len(res.Records) != 1 || res.Records[0].Type != Transfer || string(res.Records[0].Properties.Value("x")) != "2" {
			t.Fatalf("records %+v", res.Records)
		}
	})
}
