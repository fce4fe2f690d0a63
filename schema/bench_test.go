package schema

import (
	"encoding/json"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

// BenchmarkCheck: what a node pays per write with the demo's schemas: a
// 3D avatar's move (position and rotation) checked against the whole
// object.
//
//	go test ./schema -run '^$' -bench Check
func BenchmarkCheck(b *testing.B) {
	s, err := Load("../docs/demo-schemas.json")
	if err != nil {
		b.Fatal(err)
	}
	o := &gameworld.Object{Properties: gameworld.PropertiesOf(map[string]json.RawMessage{
		"kind": json.RawMessage(`"avatar3d"`), "name": json.RawMessage(`"ada"`), "color": json.RawMessage(`"hsl(120, 70%, 60%)"`),
		"position": json.RawMessage(`[1,1.6,2]`), "rotation": json.RawMessage(`[0.5,-0.1]`),
	})}
	c := gameworld.Change{Type: gameworld.Update, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage(`[1.5,1.6,2.25]`), "rotation": json.RawMessage(`[0.6,-0.1]`)})}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Check(c, o); err != nil {
			b.Fatal(err)
		}
	}
}
