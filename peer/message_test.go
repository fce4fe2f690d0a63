package peer

import (
	"encoding/json"
	"strconv"

	"github.com/solipsism/mesh/gameworld"
	"os"
	"strings"
	"testing"
)

// messageVectors are the ephemeral messages of docs/protocol.md, as a peer
// sends them and as a node relays them.
var messageVectors = []struct {
	wire string
	want AppMessage
}{
	{`["message",{"type":"chat","data":{"text":"hello"}}]`,
		AppMessage{Type: "chat", Data: []byte(`{"text":"hello"}`)}},
	{`["message",{"from":"client-AAAAAAAA-BBBBBBBB","type":"chat","data":{"text":"hello"}}]`,
		AppMessage{From: "client-AAAAAAAA-BBBBBBBB", Type: "chat", Data: []byte(`{"text":"hello"}`)}},
	{`["message",{"type":"chat","data":"see you","room":"lobby"}]`,
		AppMessage{Type: "chat", Data: []byte(`"see you"`), Room: "lobby"}},
	{`["message",{"type":"rpc","data":{"call":"open","door":7},"world":"bot-AAAAAAAA-BBBBBBBB"}]`,
		AppMessage{Type: "rpc", Data: []byte(`{"call":"open","door":7}`), World: "bot-AAAAAAAA-BBBBBBBB"}},
	{`["message",{"from":"server-8f3KQ2ab-Lm0c9Xz1","type":"solipsism.refused","data":{"id":"demo-ball-3d","reason":"breaks the property schema of kind \"ball\": at '/position/0': got null, want number; at '/position/1': got null, want number; at '/position/2': got null, want number","properties":{"position":[0,0.25,-3]}},"world":"client-AAAAAAAA-BBBBBBBB"}]`,
		AppMessage{From: "server-8f3KQ2ab-Lm0c9Xz1", Type: "solipsism.refused", World: "client-AAAAAAAA-BBBBBBBB",
			Data: []byte(`{"id":"demo-ball-3d","reason":"breaks the property schema of kind \"ball\": at '/position/0': got null, want number; at '/position/1': got null, want number; at '/position/2': got null, want number","properties":{"position":[0,0.25,-3]}}`)}},
	{`["message",{"type":"boom","data":null,"at":[12.5,0,-3]}]`,
		AppMessage{Type: "boom", At: [3]float64{12.5, 0, -3}, HasAt: true}},
}

func TestAppMessageVectors(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	var lim Limits
	for _, v := range messageVectors {
		if !strings.Contains(string(doc), "`"+v.wire+"`") {
			t.Errorf("docs/protocol.md does not show %s", v.wire)
		}
		m, err := DecodeMessage([]byte(v.wire))
		if err != nil || m.Type != TypeMessage {
			t.Fatalf("DecodeMessage(%s): %+v, %v", v.wire, m, err)
		}
		got, err := lim.DecodeAppMessage(m.Data)
		if err != nil {
			t.Fatalf("DecodeAppMessage(%s): %v", v.wire, err)
		}
		if got.From != v.want.From || got.Type != v.want.Type || string(got.Data) != string(v.want.Data) || got.Room != v.want.Room ||
			got.World != v.want.World || got.At != v.want.At || got.HasAt != v.want.HasAt {
			t.Errorf("%s decoded as %+v, want %+v", v.wire, got, v.want)
		}
		if enc := string(AppendAppMessage(nil, got)); enc != v.wire && !(v.want.Data == nil && strings.Replace(v.wire, `"data":null,`, "", 1) == strings.Replace(enc, `"data":null,`, "", 1)) {
			t.Errorf("re-encoded as %s, want %s", enc, v.wire)
		}
	}
	for _, c := range []struct{ name, data string }{
		{"not an object", `"chat"`},
		{"null", `null`},
		{"no type", `{"data":1}`},
		{"empty type", `{"type":""}`},
		{"type not a string", `{"type":3}`},
		{"type too long", `{"type":"` + strings.Repeat("x", MaxMessageTypeBytes+1) + `"}`},
		{"room and world", `{"type":"x","room":"a","world":"b"}`},
		{"empty room", `{"type":"x","room":""}`},
		{"empty from", `{"type":"x","from":""}`},
		{"at of two", `{"type":"x","at":[1,2]}`},
		{"at not numbers", `{"type":"x","at":["a","b","c"]}`},
		{"data too deep", `{"type":"x","data":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`},
	} {
		if _, err := lim.DecodeAppMessage([]byte(c.data)); err == nil {
			t.Errorf("%s: accepted %s", c.name, c.data)
		} else if !strings.Contains(err.Error(), "message") && !strings.Contains(err.Error(), "empty") {
			t.Errorf("%s: error %q does not say what was wrong", c.name, err)
		}
	}
}

// TestAppMessagesBehindSlowPeer: a sender that alternates a change and a
// message, to a peer that reads nothing meanwhile, costs the link a
// bounded outbox (it is not cut off as fallen behind), and the peer then
// gets every message in order, each after the change made before it.
func TestAppMessagesBehindSlowPeer(t *testing.T) {
	l, _, far := startLink(t, LinkOptions{Tick: Immediate})
	send := func(r *Record) { l.Offer([]*Record{r}, func(int) Verdict { return Send }, nil, true) }
	send(rec(gameworld.Add, "o", "n", "-1"))
	const count = 500 // several times the outbox's bound in items
	for i := range count {
		send(rec(gameworld.Update, "o", "n", strconv.Itoa(i)))
		if !l.SendAppMessage(AppendAppMessage(nil, AppMessage{From: "w", Type: "tick", Data: json.RawMessage(strconv.Itoa(i))})) {
			t.Fatalf("message %d dropped", i)
		}
	}
	l.outMu.Lock()
	items := len(l.outbox)
	l.outMu.Unlock()
	if items > 4 {
		t.Errorf("%d items wait in the outbox", items)
	}
	n, next := -1, 0
	for next < count {
		m := readMsg(t, far)
		switch m.Type {
		case TypeWorldChange:
			var wc struct {
				Changes []struct {
					Properties struct{ N int } `json:"properties"`
				} `json:"changes"`
			}
			json.Unmarshal(m.Data, &wc)
			for _, c := range wc.Changes {
				n = c.Properties.N
			}
		case TypeMessage:
			am, err := Limits{}.DecodeAppMessage(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if string(am.Data) != strconv.Itoa(next) {
				t.Fatalf("message %s, want %d", am.Data, next)
			}
			if n < next {
				t.Fatalf("message %d came before the change it follows (the peer holds n=%d)", next, n)
			}
			next++
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the link closed: %v", err)
	}
}
