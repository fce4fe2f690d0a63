package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

func props(t *testing.T, js string) gameworld.Properties {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return gameworld.PropertiesOf(m)
}

func TestDemoSchemas(t *testing.T) {
	s, err := Load("../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	ball := &gameworld.Object{ID: "demo-ball-3d", Properties: props(t, `{"kind":"ball","transferable":true,"persistent":true,"position":[0,0.25,-3],"velocity":[0,0,0]}`)}
	// The voxel demo's grid, with one block.
	w := gameworld.New("server-AAAAAAAA-AAAAAAAA")
	if res := w.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "grid", Owner: "client-AAAAAAAA-AAAAAAAA", Properties: props(t, `{"kind":"grid","position":[0,0,0],"size":16}`),
		Scopes: map[string]scope.Delta{"blocks": {Ver: 1, Added: map[string]scope.Fields{"0,0,0": {"c": json.RawMessage(`"#d94f4f"`)}}}}}}, nil); len(res.Refused) > 0 {
		t.Fatal(res.Refused[0].Err)
	}
	grid, _ := w.Get("grid")
	blocks := func(added, modified string, removed ...string) gameworld.Change {
		d := scope.Delta{Removed: removed}
		for _, part := range []struct {
			js  string
			dst *map[string]scope.Fields
		}{{added, &d.Added}, {modified, &d.Modified}} {
			if part.js != "" {
				if err := json.Unmarshal([]byte(part.js), part.dst); err != nil {
					t.Fatal(err)
				}
			}
		}
		return gameworld.Change{Type: gameworld.Update, ID: "grid", Scopes: map[string]scope.Delta{"blocks": d}}
	}
	for _, tc := range []struct {
		name     string
		change   gameworld.Change
		existing *gameworld.Object
		want     string // a part of the reason; empty: accepted
	}{
		{"the 3D ball as the demo makes it", gameworld.Change{Type: gameworld.Add, Properties: ball.Properties}, nil, ""},
		{"the 2D ball", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"ball","transferable":true,"persistent":true,"x":500,"y":300,"position":[500,300,0],"vx":0,"vy":0}`)}, nil, ""},
		{"a 3D avatar", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"avatar3d","name":"ada","color":"hsl(120, 70%, 60%)","position":[1,1.6,2],"rotation":[0.5,-0.1]}`)}, nil, ""},
		{"a 2D avatar", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"avatar","name":"ada","color":"hsl(120 70% 60%)","x":1,"y":2,"position":[1,2,0]}`)}, nil, ""},
		{"a move", gameworld.Change{Type: gameworld.Update, Properties: props(t, `{"position":[1,2,3]}`)}, ball, ""},
		{"NaN as JSON carries it", gameworld.Change{Type: gameworld.Update, Properties: props(t, `{"position":[null,null,null]}`)}, ball, "/position/0"},
		{"a short vector", gameworld.Change{Type: gameworld.Update, Properties: props(t, `{"velocity":[1,2]}`)}, ball, "/velocity"},
		{"far away", gameworld.Change{Type: gameworld.Update, Properties: props(t, `{"position":[1e9,0,0]}`)}, ball, "/position/0"},
		{"an unknown property", gameworld.Change{Type: gameworld.Update, Properties: props(t, `{"graffiti":"x"}`)}, ball, "graffiti"},
		{"a ball without a position", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"ball"}`)}, nil, "position"},
		{"a colour that is markup", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"avatar3d","name":"x","position":[0,0,0],"color":"red\"><script>"}`)}, nil, "/color"},
		{"a long name", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"avatar3d","position":[0,0,0],"name":"`+strings.Repeat("n", 65)+`"}`)}, nil, "/name"},
		{"another kind: not checked", gameworld.Change{Type: gameworld.Add, Properties: props(t, `{"kind":"crate","position":[null]}`)}, nil, ""},
		{"a remove", gameworld.Change{Type: gameworld.Remove}, ball, ""},
		{"a block placed", blocks(`{"1,2,3":{"c":"#5fd38d"}}`, ""), &grid, ""},
		{"a block recoloured", blocks("", `{"0,0,0":{"c":"#4f8fd9"}}`), &grid, ""},
		{"a block removed", blocks("", "", "0,0,0"), &grid, ""},
		{"a block whose colour is markup", blocks(`{"1,2,3":{"c":"red\"><script>"}}`, ""), &grid, "element \"1,2,3\": at '/c'"},
		{"a block with an unknown field", blocks("", `{"0,0,0":{"graffiti":"x"}}`), &grid, "graffiti"},
		{"a new grid's blocks", gameworld.Change{Type: gameworld.Add, ID: "g2", Properties: props(t, `{"kind":"grid","position":[0,0,0]}`),
			Scopes: map[string]scope.Delta{"blocks": {Added: map[string]scope.Fields{"0,0,0": {"c": json.RawMessage(`7`)}}}}}, nil, "at '/c'"},
	} {
		err := s.Check(tc.change, tc.existing)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: accepted", tc.name)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: the reason %q does not say %q in one line", tc.name, err, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"not JSON", `{`},
		{"nothing", `{}`},
		{"a bad schema", `{"kinds":{"a":{"type":"nonsense"}}}`},
		{"a bad default", `{"default":{"minimum":"x"}}`},
	} {
		if _, err := Parse([]byte(tc.file)); err == nil {
			t.Errorf("%s: parsed", tc.name)
		}
	}
	s, err := Parse([]byte(`{"kinds":{"a/b c":{"type":"object","required":["p"]}},"default":{"type":"object","properties":{"position":{"type":"array"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckProperties(props(t, `{"kind":"a/b c"}`)); err == nil {
		t.Error("a kind with a slash and a space was not checked")
	}
	if err := s.CheckProperties(props(t, `{"position":3}`)); err == nil || !strings.Contains(err.Error(), "default") {
		t.Errorf("an object of no kind: %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"kind":"ball","position":[null,1,2]}`))
	f.Add([]byte(`{"kind":"avatar3d","name":"x","position":[0,0,0],"rotation":[1,2]}`))
	f.Add([]byte(`{"kind":7}`))
	s, err := Load("../docs/demo-schemas.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p gameworld.Properties
		if json.Unmarshal(b, &p) != nil {
			return
		}
		if err := s.CheckProperties(p); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("an error that is not ErrInvalid: %v", err)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"kinds":{"a":{"type":"object"}},"default":{"type":"object"}}`))
	f.Add([]byte(`{"kinds":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"minimum":1}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil {
			s.CheckProperties(gameworld.PropertiesOf(map[string]json.RawMessage{"kind": json.RawMessage(`"a"`), "p": json.RawMessage(`[1,{"x":null}]`)}))
		}
	})
}
