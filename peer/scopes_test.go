package peer

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// The records of docs/protocol.md's "Scopes" section decode, apply and
// encode again to exactly the text the doc shows; the record a peer
// without scopes gets, and the hashes, are the doc's too.
func TestScopeVectors(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	sec = sec[strings.Index(sec, "## Scopes"):]
	sec = sec[:strings.Index(sec[3:], "\n## ")+3]
	recs := regexp.MustCompile("(?m)^`(\\{\"type\".*\\})`$").FindAllStringSubmatch(sec, -1)
	if len(recs) != 5 {
		t.Fatalf("the Scopes section shows %d records, want 5", len(recs))
	}
	w := gameworld.New("server")
	var lim Limits
	for i, m := range recs {
		wc, err := lim.DecodeWorldChange([]byte(`{"timestamp":1,"changes":[` + m[1] + `]}`))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		c := wc.Changes[0]
		if enc := string(AppendChange(nil, c)); enc != m[1] && i < 4 {
			t.Errorf("record %d re-encodes as\n%s\nwant\n%s", i, enc, m[1])
		}
		switch i {
		case 0, 1, 2:
			res := w.Apply([]gameworld.Change{c}, nil)
			if len(res.Refused) > 0 {
				t.Fatalf("record %d refused: %v", i, res.Refused[0].Err)
			}
			if i == 2 {
				legacy := string(appendLegacyChange(nil, res.Records[0].Change, res.Records[0].ObjectScopes))
				if legacy != recs[4][1] {
					t.Errorf("a peer without scopes gets\n%s\nwant\n%s", legacy, recs[4][1])
				}
			}
		case 3:
			o, _ := w.Get("grid-1")
			snap := gameworld.Change{Type: gameworld.Add, ID: o.ID, Owner: o.Owner, Properties: o.Properties, Scopes: o.Scopes.Snapshots()}
			if enc := string(AppendChange(nil, snap)); enc != m[1] {
				t.Errorf("the grid whole is\n%s\nwant\n%s", enc, m[1])
			}
		}
	}
	e1 := scope.ElementHash("0,0,0", []byte(`{"c":"blue","t":"stone"}`))
	e2 := scope.ElementHash("0,1,0", []byte(`{"t":"glass"}`))
	for _, want := range []string{
		fmt.Sprintf("`ElementHash(\"0,0,0\", {\"c\":\"blue\",\"t\":\"stone\"})` = `%016x`", e1),
		fmt.Sprintf("`ElementHash(\"0,1,0\", {\"t\":\"glass\"})` =\n`%016x`", e2),
		fmt.Sprintf("`ScopeHash(\"blocks\", 3, sum)` = `%016x`", gameworld.ScopeHash("blocks", 3, e1+e2)),
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the doc lacks %s", want)
		}
	}
	o, _ := w.Get("grid-1")
	if o.Scopes.Ver("blocks") != 3 {
		t.Fatalf("version %d", o.Scopes.Ver("blocks"))
	}
}
