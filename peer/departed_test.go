package peer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

// TestDepartedVectors decodes the departed message of docs/protocol.md
// ("Departures told downstream"), encodes it back byte for byte, and
// refuses the malformed ones the document lists.
func TestDepartedVectors(t *testing.T) {
	const doc = `["departed",{"worlds":["client-AAAAAAAA-BBBBBBBB"],"heir":"server-8f3KQ2ab-Lm0c9Xz1"}]`
	m, err := DecodeMessage([]byte(doc))
	if err != nil || m.Type != TypeDeparted {
		t.Fatalf("DecodeMessage: %+v, %v", m, err)
	}
	var lim Limits
	d, err := lim.DecodeDeparted(m.Data)
	if err != nil || !slices.Equal(d.Worlds, []string{"client-AAAAAAAA-BBBBBBBB"}) || d.Heir != "server-8f3KQ2ab-Lm0c9Xz1" {
		t.Fatalf("decoded %+v, %v", d, err)
	}
	if got := string(AppendDeparted(nil, d)); got != doc {
		t.Fatalf("encoded %s, want %s", got, doc)
	}
	many := make([]string, MaxDepartedWorlds+1)
	for i := range many {
		many[i] = `"w` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `-` + string(rune('a'+i/26)) + `"`
	}
	for _, c := range []struct{ name, data string }{
		{"no worlds", `{"worlds":[],"heir":"s"}`},
		{"a world twice", `{"worlds":["a","a"],"heir":"s"}`},
		{"no heir", `{"worlds":["a"]}`},
		{"an empty world", `{"worlds":[""],"heir":"s"}`},
		{"worlds not an array", `{"worlds":"a","heir":"s"}`},
		{"an identifier too long", `{"worlds":["` + strings.Repeat("a", 257) + `"],"heir":"s"}`},
		{"too many worlds", `{"worlds":[` + strings.Join(many, ",") + `],"heir":"s"}`},
		{"not an object", `[]`},
	} {
		if _, err := lim.DecodeDeparted([]byte(c.data)); err == nil {
			t.Errorf("%s: accepted %s", c.name, c.data)
		} else if !strings.Contains(err.Error(), "departed") && !strings.Contains(err.Error(), "long") {
			t.Errorf("%s: error %q does not say what was wrong", c.name, err)
		}
	}
}

// TestSendDepartedSplits: a departure of more worlds than one message
// takes goes out as several, in order, after what was offered before and
// before what is offered after, each counted as a departed message.
func TestSendDepartedSplits(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: Immediate})
	worlds := make([]string, 2*MaxDepartedWorlds+10)
	for i := range worlds {
		worlds[i] = fmt.Sprintf("client-%08d-AAAAAAAA", i)
	}
	l.Offer([]*Record{rec(gameworld.Add, "before")}, func(int) Verdict { return Send }, nil, true)
	l.SendDeparted(Departed{Worlds: worlds, Heir: "server-8f3KQ2ab-Lm0c9Xz1"})
	l.Offer([]*Record{rec(gameworld.Add, "after")}, func(int) Verdict { return Send }, nil, true)
	var got []string
	var types []string
	for len(types) < 5 {
		m := readMsg(t, far)
		types = append(types, m.Type)
		if m.Type == TypeDeparted {
			d, err := Limits{}.DecodeDeparted(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Worlds...)
		}
	}
	if want := []string{TypeWorldChange, TypeDeparted, TypeDeparted, TypeDeparted, TypeWorldChange}; !slices.Equal(types, want) {
		t.Fatalf("messages %v, want %v", types, want)
	}
	if !slices.Equal(got, worlds) {
		t.Fatalf("departed worlds: %d of %d, or out of order", len(got), len(worlds))
	}
	if n := l.Stats().MessagesOut[KindDeparted].Load(); n != 3 {
		t.Fatalf("%d departed messages counted, want 3", n)
	}
}
