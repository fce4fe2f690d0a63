package schema_test

import (
	"encoding/json"
	"fmt"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/schema"
)

func ExampleSet_Check() {
	set, err := schema.Parse([]byte(`{"kinds":{"ball":{"type":"object","properties":{"position":{"type":"array","items":{"type":"number"},"minItems":3,"maxItems":3}}}}}`))
	if err != nil {
		panic(err)
	}
	ball := &gameworld.Object{ID: "ball", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"kind": json.RawMessage(`"ball"`), "position": json.RawMessage(`[0,1,2]`)})}
	move := gameworld.Change{Type: gameworld.Update, ID: "ball", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage(`[null,1,2]`)})}
	fmt.Println(set.Check(move, ball))
	// Output: breaks the property schema of kind "ball": at '/position/0': got null, want number
}
