package peer

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestInterestMetadata(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    string
		boxes int
		has   bool
		bad   bool
	}{
		{"absent", `{"identifier":"a"}`, 0, false, false},
		{"null", `{"identifier":"a","interest":null}`, 0, false, false},
		{"one box", `{"identifier":"a","interest":{"min":[0,0,0],"max":[1,2,3]}}`, 1, true, false},
		{"a list", `{"identifier":"a","interest":[{"min":[0,0,0],"max":[1,2,3]},{"min":[-5,-5,-5],"max":[5,5,5]}]}`, 2, true, false},
		{"nothing", `{"identifier":"a","interest":[]}`, 0, true, false},
		{"min above max", `{"identifier":"a","interest":{"min":[2,0,0],"max":[1,2,3]}}`, 0, false, true},
		{"two numbers", `{"identifier":"a","interest":{"min":[0,0],"max":[1,2,3]}}`, 0, false, true},
		{"no max", `{"identifier":"a","interest":{"min":[0,0,0]}}`, 0, false, true},
		{"a string", `{"identifier":"a","interest":"everywhere"}`, 0, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			md, err := Limits{}.DecodeMetadata(json.RawMessage(c.in))
			var de *DecodeError
			if c.bad {
				if !errors.As(err, &de) || de.Code != StatusInvalidPayload {
					t.Fatalf("err %v, want a 1007 decode error", err)
				}
				return
			}
			if err != nil || md.HasInterest != c.has || len(md.Interest) != c.boxes {
				t.Fatalf("%+v, %v", md, err)
			}
			// It survives a round trip.
			msg := AppendMetadata(nil, TypeMetadata, md)
			var parts []json.RawMessage
			json.Unmarshal(msg, &parts)
			back, err := Limits{}.DecodeMetadata(parts[1])
			if err != nil || back.HasInterest != md.HasInterest || len(back.Interest) != len(md.Interest) {
				t.Fatalf("round trip of %s: %+v, %v", msg, back, err)
			}
		})
	}
}
