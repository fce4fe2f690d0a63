package snapshot

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/scope"
)

// FuzzSnapshot feeds a client's world a snapshot it could have received
// after a good one: no panic, and a packet that fails changes nothing.
func FuzzSnapshot(f *testing.F) {
	s := newFuzzServer()
	good := s.packet(1)
	f.Add(good)
	f.Add(s.packet(2))
	s.s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": {Ver: 2, Base: 1,
		Removed: []string{"0,0,0"}, Modified: map[string]scope.Fields{"1,0,0": {"c": []byte("2")}}}}}, After: gameworld.PropertiesOf(map[string]json.RawMessage{})})
	f.Add(s.packet(3))
	for i, obj := range []string{"a", "ü"} { // moves: a compact group
		s.s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Update, ID: obj}, After: transform(float64(i)+0.5, 2, 0.7)})
	}
	f.Add(s.packet(4))
	f.Add([]byte{msgSnapshot})
	f.Fuzz(func(t *testing.T, p []byte) {
		w := newWorld([]GhostType{GenericType, TransformType})
		w.loaded, w.hashes = []int{0, 1}, []uint32{GenericType.Hash(), TransformType.Hash()}
		if err := w.apply(good); err != nil {
			t.Fatal(err)
		}
		before := len(w.Objects())
		tick := w.lastTick
		if err := w.apply(p); err != nil {
			if len(w.Objects()) != before || w.lastTick != tick {
				t.Fatal("a failed packet changed the world")
			}
		}
	})
}

func FuzzCommand(f *testing.F) {
	var w Writer
	(&command{Tick: 3, AckTick: 2, AckMask: 1, Loaded: 2, Digest: 9, Updates: []update{{ID: "a", Props: []byte(`{"x":1}`)}, {ID: "b", Op: opRemove}, {ID: "c", Op: opTake}, {ID: "d", Op: opRelease}, {ID: "e", Op: opElements, Seq: 4, Scope: "blocks", Props: []byte(`{"ver":0,"removed":["x"]}`)}}}).write(&w)
	f.Add(w.Bytes())
	w.Reset()
	(&command{Tick: 4, Digest: 9, Interest: &interestOf{Seq: 2, Interest: Interest{Boxes: []peer.Box{{Min: [3]float64{-1, -2, -3}, Max: [3]float64{1, 2, 3}}}, Rooms: []string{"red", ""}}}}).write(&w)
	f.Add(w.Bytes())
	f.Add([]byte{msgCommand})
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := decodeCommand(p)
		if err != nil {
			return
		}
		if len(c.Updates) > maxUpdates {
			t.Fatalf("%d updates", len(c.Updates))
		}
		var w Writer
		c.write(&w)
		back, err := decodeCommand(w.Bytes())
		if err != nil || back.Tick != c.Tick || len(back.Updates) != len(c.Updates) || !reflect.DeepEqual(back.Interest, c.Interest) {
			t.Fatalf("re-encoding: %v", err)
		}
		if in := c.Interest; in != nil {
			if len(in.Boxes) > MaxInterestBoxes || len(in.Rooms) > MaxInterestRooms {
				t.Fatalf("an interest of %d boxes and %d rooms", len(in.Boxes), len(in.Rooms))
			}
			if err := checkInterest(in.Interest); err != nil {
				t.Fatalf("decoded an interest the client could not send: %v", err)
			}
		}
	})
}

// fuzzServer builds real snapshot packets without sockets.
type fuzzServer struct {
	s *Server
	c *conn
}

func newFuzzServer() *fuzzServer {
	s := &Server{types: []GhostType{GenericType, TransformType}, objects: map[string]*ghost{}, byName: map[string]int{}, tick: 1}
	for i, t := range s.types {
		s.hashes = append(s.hashes, t.Hash())
		s.byName[t.Name] = i
	}
	c := &conn{despawns: map[uint32]bool{}, loaded: 2}
	for i, obj := range []string{"a", "b/c", "ü"} {
		p := transform(float64(i), 2, 0.5)
		if i == 1 {
			p = p.Without("ghostType")
		}
		s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: obj}, After: p})
	}
	// A grid: a ghost with a buffer.
	blocks := scope.Delta{Ver: 1, Full: true, Added: map[string]scope.Fields{"0,0,0": {"c": []byte("1")}, "1,0,0": {"c": []byte(`"red"`)}}}
	s.applyLocked(relay.Delivery{Change: gameworld.Change{Type: gameworld.Add, ID: "grid", Scopes: map[string]scope.Delta{"blocks": blocks}}, After: gameworld.PropertiesOf(map[string]json.RawMessage{})})
	return &fuzzServer{s: s, c: c}
}

func (f *fuzzServer) packet(tick uint32) []byte {
	f.s.tick = tick
	var w Writer
	f.s.snapshotLocked(f.c, &w)
	f.s.ackLocked(f.c, tick, 0)
	return append([]byte(nil), w.Bytes()...)
}
