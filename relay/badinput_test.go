package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/internal/wiretest"
)

func TestServerBadInput(t *testing.T) {
	node, url := startNode(t, relay.Options{})
	// Two bystanders keep talking through every case.
	a := wiretest.Dial(t, url, "client-aaaaaaaa-aaaaaaaa", wiretest.Options{})
	b := wiretest.Dial(t, url, "client-bbbbbbbb-bbbbbbbb", wiretest.Options{})
	waitFor(t, "ready", 5*time.Second, func() bool { return readyLinks(node) == 2 })
	a.Change(wiretest.Add("a-obj", a.ID, props{"tick": 0}))
	b.WaitProp("a-obj", "tick", "0")
	tick := 0

	goodAdd := `{"type":"add","id":"bad-1","owner":"client-xxxxxxxx-xxxxxxxx","properties":{"v":1}}`
	deep := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	many := func(n int) string {
		var sb strings.Builder
		sb.WriteString(`["worldChange",{"timestamp":1700000000000,"changes":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"type":"add","id":"m%d","owner":"client-xxxxxxxx-xxxxxxxx","properties":{}}`, i)
		}
		sb.WriteString("]}]")
		return sb.String()
	}
	bigProp := `["worldChange",{"timestamp":1,"changes":[{"type":"add","id":"big","owner":"client-xxxxxxxx-xxxxxxxx","properties":{"blob":"` + strings.Repeat("x", 2<<20) + `"}}]}]`

	tests := []struct {
		name   string
		msg    string
		binary bool
		// want is the close code, or 0 when the message is ignored and the
		// link stays open.
		want websocket.StatusCode
	}{
		{"invalid JSON", `["worldChange", {`, false, websocket.StatusInvalidFramePayloadData},
		{"not JSON at all", `hello`, false, websocket.StatusInvalidFramePayloadData},
		{"non-array", `{"type":"worldChange"}`, false, websocket.StatusInvalidFramePayloadData},
		{"empty array", `[]`, false, websocket.StatusInvalidFramePayloadData},
		{"three elements", `["worldChange",{"changes":[]},1]`, false, websocket.StatusInvalidFramePayloadData},
		{"type not a string", `[42,{}]`, false, websocket.StatusInvalidFramePayloadData},
		{"worldChange without data", `["worldChange"]`, false, websocket.StatusInvalidFramePayloadData},
		{"unknown type", `["teleport",{"to":"moon"}]`, false, 0},
		{"changes not an array", `["worldChange",{"timestamp":1,"changes":{"0":` + goodAdd + `}}]`, false, websocket.StatusInvalidFramePayloadData},
		{"change without id", `["worldChange",{"changes":[` + goodAdd + `,{"type":"add","owner":"x","properties":{}}]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"change without type", `["worldChange",{"changes":[` + goodAdd + `,{"id":"q","owner":"x"}]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"unknown change type", `["worldChange",{"changes":[{"type":"explode","id":"q"}]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"properties not an object", `["worldChange",{"changes":[{"type":"add","id":"q","owner":"client-xxxxxxxx-xxxxxxxx","properties":[1]}]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"timestamp not a number", `["worldChange",{"timestamp":"noon","changes":[]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"remove of unknown id", `["worldChange",{"timestamp":1,"changes":[{"type":"remove","id":"nope","owner":"client-xxxxxxxx-xxxxxxxx"}]}]`, false, 0},
		{"update of unknown id", `["worldChange",{"timestamp":1,"changes":[{"type":"update","id":"nope","owner":"client-xxxxxxxx-xxxxxxxx","properties":{"v":2}}]}]`, false, 0},
		{"metadata not an object", `["metadataChange","me"]`, false, websocket.StatusInvalidFramePayloadData},
		{"binary frame", `["worldChange",{"changes":[]}]`, true, websocket.StatusUnsupportedData},
		{"frame over the read limit", bigProp, false, websocket.StatusMessageTooBig},
		{"20k changes in one message (a 2016 peer's whole world)", many(20000), false, 0},
		{"a bad record after a chunk's worth of good ones", strings.TrimSuffix(many(2000), "]}]") + `,{"type":"add"}]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"deeply nested properties", `["worldChange",{"changes":[{"type":"add","id":"deep","owner":"client-xxxxxxxx-xxxxxxxx","properties":` + deep + `}]}]`, false, websocket.StatusInvalidFramePayloadData},
		{"nesting beyond the JSON parser", `["worldChange",` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `]`, false, websocket.StatusInvalidFramePayloadData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := wiretest.Dial(t, url, "client-xxxxxxxx-xxxxxxxx", wiretest.Options{})
			waitFor(t, "bad peer ready", 5*time.Second, func() bool { return readyLinks(node) == 3 })
			objects := node.World().Len()
			var err error
			if tt.binary {
				err = bad.SendBinary([]byte(tt.msg))
			} else {
				err = bad.SendRaw([]byte(tt.msg))
			}
			if err != nil && tt.want == 0 {
				t.Fatalf("send: %v", err)
			}
			if tt.want != 0 {
				code, reason := bad.WaitClosed(5 * time.Second)
				if code != tt.want {
					t.Fatalf("close code = %d (%q), want %d", code, reason, tt.want)
				}
				if reason == "" {
					t.Error("close without a reason")
				}
			} else {
				// Still open: a valid write afterwards goes through.
				bad.Change(wiretest.Add("bad-ok", bad.ID, props{"ok": true}))
				a.WaitProp("bad-ok", "ok", "true")
				bad.Change(wiretest.Remove("bad-ok", bad.ID))
				a.WaitGone("bad-ok")
				bad.Close()
			}
			waitFor(t, "bad peer gone", 5*time.Second, func() bool { return readyLinks(node) == 2 })
			// (A departed peer's objects go a slice at a time.)
			waitFor(t, fmt.Sprintf("the world as it was (%d objects)", objects), 5*time.Second, func() bool { return node.World().Len() == objects })
			// The bystanders never noticed.
			tick++
			a.Change(wiretest.Update("a-obj", a.ID, props{"tick": tick}))
			b.WaitProp("a-obj", "tick", fmt.Sprint(tick))
		})
	}
	a.CheckClean()
	b.CheckClean()
}
