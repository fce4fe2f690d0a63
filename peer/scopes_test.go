package peer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

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

	// The scopeChange the section shows is its second record.
	msg := regexp.MustCompile("(?m)^`(\\[\"scopeChange\".*\\])`$").FindStringSubmatch(sec)
	if msg == nil {
		t.Fatal("the Scopes section shows no scopeChange")
	}
	changes := readScopeChange(t, msg[1])
	if len(changes) != 1 || string(AppendChange(nil, changes[0])) != recs[1][1] {
		t.Fatalf("the scopeChange decodes as %+v, want the record\n%s", changes, recs[1][1])
	}
	r := NewRecord(changes[0], 0)
	if enc := `["scopeChange",{` + string(r.scopeEntry()) + `}]`; enc != msg[1] {
		t.Errorf("the scopeChange re-encodes as\n%s\nwant\n%s", enc, msg[1])
	}
	if !strings.Contains(sec, fmt.Sprintf("%d bytes where the `worldChange` takes %d", len(msg[1]),
		len(AppendWorldChangeTrailer(append(AppendWorldChangeHeader(nil, 1764244000123), recs[1][1]...), false)))) {
		t.Error("the section's byte counts are not the vectors'")
	}
}

// readScopeChange decodes a whole scopeChange message as a link does.
func readScopeChange(t *testing.T, msg string) []gameworld.Change {
	t.Helper()
	var out []gameworld.Change
	var lim Limits
	m, err := lim.ReadMessage(strings.NewReader(msg), nil, 0, func(wc WorldChange) error {
		out = append(out, wc.Changes...)
		return nil
	})
	if err != nil || m.Type != TypeScopeChange {
		t.Fatalf("%s: type %q, %v", msg, m.Type, err)
	}
	return out
}

func TestScopeChangeDecoding(t *testing.T) {
	tests := []struct {
		name, msg string
		ids       []string // nil: refused with 1007
	}{
		{"two objects", `["scopeChange",{"a":{"blocks":{"ver":2,"removed":["x"]}},"b\u0041":{"blocks":{"ver":0,"added":{"y":{"c":1}}},"tiles":{"ver":5,"full":true}}}]`, []string{"a", "bA"}},
		{"empty", `["scopeChange",{}]`, []string{}},
		{"not an object", `["scopeChange",[]]`, nil},
		{"no scope", `["scopeChange",{"a":{}}]`, nil},
		{"scopes not an object", `["scopeChange",{"a":[1]}]`, nil},
		{"an id twice", `["scopeChange",{"a":{"b":{"ver":2}},"a":{"b":{"ver":3}}}]`, nil},
		{"empty id", `["scopeChange",{"":{"b":{"ver":2}}}]`, nil},
		{"no version", `["scopeChange",{"a":{"b":{"base":1}}}]`, nil},
		{"bad element id", `["scopeChange",{"a":{"b":{"ver":2,"added":{"":{}}}}}]`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []gameworld.Change
			var lim Limits
			_, err := lim.ReadMessage(strings.NewReader(tt.msg), nil, 0, func(wc WorldChange) error {
				got = append(got, wc.Changes...)
				return nil
			})
			if tt.ids == nil {
				var de *DecodeError
				if !errors.As(err, &de) || de.Code != StatusInvalidPayload || len(got) > 0 {
					t.Fatalf("got %v and %d changes, want 1007 and none", err, len(got))
				}
				return
			}
			if err != nil || len(got) != len(tt.ids) {
				t.Fatalf("got %d changes, %v", len(got), err)
			}
			for i, c := range got {
				if c.Type != gameworld.Update || c.ID != tt.ids[i] || len(c.Scopes) == 0 || !c.Properties.IsZero() || c.Owner != "" {
					t.Fatalf("change %d: %+v", i, c)
				}
			}
		})
	}
}

// A batch of scope deltas alone goes to a peer that takes scopes as
// scopeChange messages (split by the frame limit), anything else as a
// worldChange; a peer without scopes gets worldChanges.
func TestLinkSendsScopeChange(t *testing.T) {
	blocks := func(id string, n int) *Record {
		d := scope.Delta{Ver: uint64(n + 1), Added: map[string]scope.Fields{}}
		for i := range n {
			d.Added[fmt.Sprint(i)] = scope.Fields{"c": json.RawMessage(`"` + strings.Repeat("x", 50) + `"`)}
		}
		return NewRecord(gameworld.Change{Type: gameworld.Update, ID: id, Scopes: map[string]scope.Delta{"blocks": d}}, slotOf(id))
	}
	for _, takes := range []bool{true, false} {
		t.Run(fmt.Sprint("takes scopes ", takes), func(t *testing.T) {
			l, h, far := startLink(t, LinkOptions{Tick: Immediate, MaxFrameBytes: 1024})
			features := `[]`
			if takes {
				features = `["scopes"]`
			}
			write(t, far, `["metadata",{"identifier":"client-AAAAAAAA-BBBBBBBB","features":`+features+`}]`)
			deadline := time.Now().Add(5 * time.Second)
			for h.mu.Lock(); len(h.metadata) == 0; h.mu.Lock() {
				h.mu.Unlock()
				if time.Now().After(deadline) {
					t.Fatal("the link did not take the metadata")
				}
				time.Sleep(time.Millisecond)
			}
			h.mu.Unlock()
			// The peer knows the objects (it wrote them: echoes).
			l.Offer([]*Record{rec(gameworld.Add, "g1"), rec(gameworld.Add, "g2"), rec(gameworld.Add, "g3"), rec(gameworld.Add, "g4"), rec(gameworld.Add, "o")},
				func(int) Verdict { return Echo }, nil, true)
			sent := []*Record{blocks("g1", 3), blocks("g2", 12), blocks("g3", 1)}
			l.Offer(sent, sendAll, nil, true)
			var got []gameworld.Change
			msgs := 0
			for len(got) < len(sent) {
				m := readMsg(t, far)
				if m.Type == TypeMetadata || m.Type == TypeRequestMetadata {
					continue
				}
				msgs++
				want := map[bool]string{true: TypeScopeChange, false: TypeWorldChange}[takes]
				if m.Type != want {
					t.Fatalf("got a %s, want %s", m.Type, want)
				}
				if takes {
					got = append(got, readScopeChange(t, `["scopeChange",`+string(m.Data)+`]`)...)
					continue
				}
				var lim Limits
				wc, err := lim.DecodeWorldChange(m.Data)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, wc.Changes...)
			}
			for i, c := range got {
				want := sent[i].Change
				if takes && (c.ID != want.ID || string(AppendChange(nil, c)) != string(AppendChange(nil, want))) {
					t.Fatalf("change %d:\n%s\nwant\n%s", i, AppendChange(nil, c), AppendChange(nil, want))
				}
				if !takes && (c.ID != want.ID || len(c.Scopes) > 0) {
					t.Fatalf("change %d to a peer without scopes: %s", i, AppendChange(nil, c))
				}
			}
			if takes && msgs < 2 {
				t.Fatalf("%d records over 1 KiB in %d message", len(sent), msgs)
			}
			// A batch with anything else goes as a worldChange.
			l.Offer([]*Record{blocks("g4", 1), update("o", 1)}, sendAll, nil, true)
			m := readMsg(t, far)
			for m.Type == TypeMetadata || m.Type == TypeRequestMetadata {
				m = readMsg(t, far)
			}
			if m.Type != TypeWorldChange {
				t.Fatalf("a mixed batch went as %s", m.Type)
			}
		})
	}
}

// A link that awaits the peer's metadata sends no record before it: a
// scope written at once goes as a scope to a peer that turns out to take
// them, not as a property (which the peer would keep beside its scope).
func TestLinkAwaitsMetadataForRecords(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: Immediate, AwaitMetadata: true})
	l.RequestMetadata()
	g := NewRecord(gameworld.Change{Type: gameworld.Add, ID: "g", Owner: "w", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{}),
		Scopes: map[string]scope.Delta{"blocks": {Ver: 1, Full: true, Added: map[string]scope.Fields{"a": {"c": json.RawMessage("1")}}}}}, 1)
	l.Offer([]*Record{g}, sendAll, nil, true)
	if m := readMsg(t, far); m.Type != TypeRequestMetadata {
		t.Fatalf("first came a %s, want the request for metadata", m.Type)
	}
	time.Sleep(200 * time.Millisecond)
	if n := l.stats.MessagesOut[KindWorldChange].Load(); n != 0 {
		t.Fatalf("%d worldChanges sent before the peer's metadata", n)
	}
	write(t, far, `["metadata",{"identifier":"server-AAAAAAAA-BBBBBBBB","features":["scopes"]}]`)
	m := readMsg(t, far)
	var lim Limits
	wc, err := lim.DecodeWorldChange(m.Data)
	if err != nil || m.Type != TypeWorldChange || len(wc.Changes) != 1 || len(wc.Changes[0].Scopes) != 1 || wc.Changes[0].Properties.Len() != 0 {
		t.Fatalf("got %s %s (%v)", m.Type, m.Data, err)
	}
}
