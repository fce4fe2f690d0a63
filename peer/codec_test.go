package peer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

func TestDecodeMessage(t *testing.T) {
	tests := []struct {
		in      string
		typ     string
		data    string
		wantErr bool
	}{
		{`["worldChange",{"changes":[]}]`, "worldChange", `{"changes":[]}`, false},
		{`["requestRefresh"]`, "requestRefresh", "", false},
		{`["requestRefresh",null]`, "requestRefresh", "null", false},
		{`["requestMetadata"]`, "requestMetadata", "", false},
		{` ["requestLessData"] `, "requestLessData", "", false},
		{`["somethingNew",{"x":1}]`, "somethingNew", `{"x":1}`, false},
		{`["somethingNew"]`, "somethingNew", "", false},
		{`["worldChange"]`, "", "", true},
		{`["metadata"]`, "", "", true},
		{`[]`, "", "", true},
		{`[1,2]`, "", "", true},
		{`{"a":1}`, "", "", true},
		{`"x"`, "", "", true},
		{``, "", "", true},
		{`["a",1,2]`, "", "", true},
		{`["worldChange",{}`, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := DecodeMessage([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || m.Type != tt.typ || string(m.Data) != tt.data {
				t.Fatalf("got %q %q %v", m.Type, m.Data, err)
			}
		})
	}
}

func TestDecodeWorldChange(t *testing.T) {
	var lim Limits
	wc, err := lim.DecodeWorldChange(json.RawMessage(`{"timestamp":1468275353123.5,"changes":[
		{"type":"add","id":"2345y789-2345y789","owner":"server-2345y789-2345y789","properties":{"position":[1,2,3]}},
		{"type":"update","id":"2345y789-2345y789","properties":{"position":[1,2,4]}},
		{"type":"remove","id":"2345y789-2345y789"}],"refreshed":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if wc.Timestamp != 1468275353123 || len(wc.Changes) != 3 || !wc.Refreshed {
		t.Fatalf("got %+v", wc)
	}
	c := wc.Changes[0]
	if c.Type != gameworld.Add || c.Owner != "server-2345y789-2345y789" || string(c.Properties.Value("position")) != "[1,2,3]" {
		t.Fatalf("add decoded as %+v", c)
	}
	if wc.Changes[2].Type != gameworld.Remove || !wc.Changes[2].Properties.IsZero() {
		t.Fatalf("remove decoded as %+v", wc.Changes[2])
	}

	bad := map[string]string{
		"not an object":        `[]`,
		"changes missing":      `{"timestamp":1}`,
		"changes null":         `{"changes":null}`,
		"change not object":    `{"changes":[1]}`,
		"id not string":        `{"changes":[{"type":"add","id":5}]}`,
		"empty id":             `{"changes":[{"type":"add","id":""}]}`,
		"owner not string":     `{"changes":[{"type":"add","id":"a","owner":1}]}`,
		"long id":              `{"changes":[{"type":"add","id":"` + strings.Repeat("a", 300) + `"}]}`,
		"properties string":    `{"changes":[{"type":"add","id":"a","properties":"x"}]}`,
		"too deep":             `{"changes":[{"type":"add","id":"a","properties":{"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}]}`,
		"timestamp not number": `{"timestamp":true,"changes":[]}`,
		"answer not boolean":   `{"changes":[{"type":"transfer","id":"a","answer":1}]}`,
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := lim.DecodeWorldChange(json.RawMessage(in)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	// Nesting inside strings does not count.
	if _, err := lim.DecodeWorldChange(json.RawMessage(`{"changes":[{"type":"add","id":"a","properties":{"s":"` + strings.Repeat("[", 100) + `"}}]}`)); err != nil {
		t.Fatalf("brackets in a string counted as nesting: %v", err)
	}
}

func TestDecodeMetadata(t *testing.T) {
	var lim Limits
	tests := []struct {
		in    string
		id    string
		chain string
		err   bool
	}{
		{`{"identifier":"a","identifierChain":["a","b"]}`, "a", "a,b", false},
		{`{"identifier":"a"}`, "a", "a", false},
		{`{"identifierChain":["a","b"]}`, "a", "a,b", false},
		{`{"identifier":"a","identifierChain":["b"]}`, "a", "a,b", false},
		{`{"identifier":"a","identifierChain":["a","b","b"]}`, "a", "a,b", false},
		{`{"identifier":"a","role":"proxy","other":{"x":1}}`, "a", "a", false},
		{`{}`, "", "", true},
		{`{"identifier":1}`, "", "", true},
		{`{"identifier":"a","identifierChain":"a"}`, "", "", true},
		{`{"identifier":"a","identifierChain":[""]}`, "", "", true},
		{`null`, "", "", true},
		{`{"identifier":"a","refused":["b"]}`, "a", "a", false},
		{`{"identifier":"a","refused":"b"}`, "", "", true},
		{`{"identifier":"a","refused":[""]}`, "", "", true},
		{`{"identifier":"a","refused":[1]}`, "", "", true},
		{`{"identifier":"a","taken":["b"]}`, "a", "a", false},
		{`{"identifier":"a","taken":"b"}`, "", "", true},
		{`{"identifier":"a","taken":[""]}`, "", "", true},
		{`{"identifier":"a","budget":20000}`, "a", "a", false},
		{`{"identifier":"a","budget":null}`, "a", "a", false},
		{`{"identifier":"a","budget":-1}`, "", "", true},
		{`{"identifier":"a","budget":1.5}`, "", "", true},
		{`{"identifier":"a","budget":"20000"}`, "", "", true},
		{`{"identifier":"a","budget":1e300}`, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			md, err := lim.DecodeMetadata(json.RawMessage(tt.in))
			if tt.err {
				if err == nil {
					t.Fatalf("decoded %+v, want error", md)
				}
				return
			}
			if err != nil || md.Identifier != tt.id || strings.Join(md.IdentifierChain, ",") != tt.chain {
				t.Fatalf("got %+v, %v", md, err)
			}
		})
	}
}

func TestBudgetRoundTrip(t *testing.T) {
	var lim Limits
	for _, b := range []int{0, 1, 20000, 1 << 30} {
		m, err := DecodeMessage(AppendMetadata(nil, TypeMetadataChange, Metadata{Identifier: "a", Budget: b}))
		if err != nil {
			t.Fatal(err)
		}
		md, err := lim.DecodeMetadata(m.Data)
		if err != nil || md.Budget != b {
			t.Errorf("budget %d came back as %d (%v)", b, md.Budget, err)
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	c := gameworld.Change{Type: gameworld.Add, ID: "id-\"quoted\"-<tag>", Owner: "client-ünï",
		Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"pos": json.RawMessage(`[1, 2, 3]`), "name": json.RawMessage(`"x"`)})}
	buf := AppendWorldChangeHeader(nil, 1700000000000)
	buf = AppendChange(buf, c)
	buf = append(buf, ',')
	buf = AppendChange(buf, gameworld.Change{Type: gameworld.Remove, ID: "r", Owner: "o"})
	buf = append(buf, ',')
	buf = AppendChange(buf, gameworld.Change{Type: gameworld.Transfer, ID: "t", Owner: "o", Epoch: 7, Answer: true})
	buf = append(buf, ',')
	buf = AppendChange(buf, gameworld.Change{Type: gameworld.Update, ID: "u", Owner: "o", Answer: true})
	buf = AppendWorldChangeTrailer(buf, true)
	m, err := DecodeMessage(buf)
	if err != nil {
		t.Fatal(err)
	}
	var lim Limits
	wc, err := lim.DecodeWorldChange(m.Data)
	if err != nil {
		t.Fatalf("%v in %s", err, buf)
	}
	got := wc.Changes[0]
	if got.ID != c.ID || got.Owner != c.Owner || string(got.Properties.Value("pos")) != "[1,2,3]" || !wc.Refreshed || wc.Timestamp != 1700000000000 {
		t.Fatalf("round trip: %+v from %s", wc, buf)
	}
	if tr := wc.Changes[2]; tr.Type != gameworld.Transfer || tr.Epoch != 7 || !tr.Answer {
		t.Fatalf("transfer answer round trip: %+v from %s", tr, buf)
	}
	if u := wc.Changes[3]; u.Answer || strings.Contains(string(buf), `"id":"u","owner":"o","answer"`) {
		t.Fatalf("only transfers carry answer: %+v from %s", u, buf)
	}
	md := Metadata{Identifier: "a", IdentifierChain: []string{"a", "b"}, Role: "proxy", Refused: []string{"c", "d"}, Taken: []string{"e"}}
	for _, name := range []string{TypeMetadata, TypeMetadataChange} {
		m, err := DecodeMessage(AppendMetadata(nil, name, md))
		if err != nil || m.Type != name {
			t.Fatal(m, err)
		}
		got, err := lim.DecodeMetadata(m.Data)
		if err != nil || got.Role != "proxy" || len(got.IdentifierChain) != 2 || strings.Join(got.Refused, ",") != "c,d" || strings.Join(got.Taken, ",") != "e" {
			t.Fatal(got, err)
		}
	}
	if string(AppendRequest(nil, TypeRequestRefresh)) != `["requestRefresh",null]` {
		t.Fatal("request encoding")
	}
}
