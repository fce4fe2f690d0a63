package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
)

// view is a Receiver that keeps each object's properties.
type view struct {
	mu   sync.Mutex
	objs map[string]gameworld.Properties
}

func newView() *view { return &view{objs: map[string]gameworld.Properties{}} }

func (v *view) Receive(ds []relay.Delivery) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range ds {
		if d.Type == gameworld.Remove {
			delete(v.objs, d.ID)
		} else if !d.After.IsZero() {
			v.objs[d.ID] = d.After
		}
	}
}

func (v *view) get(id string) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.objs[id]
	if !ok {
		return "", false
	}
	b, _ := json.Marshal(p)
	return string(b), true
}

// diff describes how v differs from w ("" if it holds exactly w's
// objects and properties).
func (v *view) diff(w *gameworld.World) string {
	diff := ""
	want := map[string]bool{}
	w.Range(func(o gameworld.Object) bool {
		want[o.ID] = true
		if got, ok := v.get(o.ID); !ok {
			diff = "lacks " + o.ID
		} else if b, _ := json.Marshal(o.Properties); string(b) != got {
			diff = fmt.Sprintf("%s is %s, the world's %s", o.ID, got, b)
		}
		return true
	})
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.objs {
		if !want[id] {
			diff = "holds " + id
		}
	}
	return diff
}

// TestAttachment: an in-process peer obeys the rules of a downstream link,
// seen from Solipsism clients on real WebSockets, through a proxy too.
func TestAttachment(t *testing.T) {
	server, url := startNode(t, relay.Options{Tick: 10 * time.Millisecond})
	proxy, purl := startProxy(t, url, relay.Options{Tick: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, url, client.Options{Prefix: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := client.Dial(ctx, purl, client.Options{Prefix: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	rock, _ := alice.Create(map[string]any{"kind": "rock"})

	obs := newView()
	if _, err := server.Attach(relay.AttachOptions{Receiver: obs}); err != nil {
		t.Fatal(err)
	}
	agentID := gameworld.NewIdentifier("agent")
	agent, err := proxy.Attach(relay.AttachOptions{Identifier: agentID})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the observer to be sent the world", 5*time.Second, func() bool { _, ok := obs.get(rock); return ok })

	res, err := agent.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "lamp", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"on": json.RawMessage(` true `)})}})
	if err != nil || len(res.Records) != 1 || res.Records[0].Owner != agentID {
		t.Fatalf("agent's add: %+v, %v", res, err)
	}
	waitFor(t, "alice and the observer to see the agent's lamp, through the proxy", 5*time.Second, func() bool {
		o, ok := alice.World().Get("lamp")
		p, seen := obs.get("lamp")
		return ok && o.Owner == agentID && seen && p == `{"on":true}`
	})
	if _, ok := bob.World().Get("lamp"); !ok {
		waitFor(t, "bob, on the proxy, to see the lamp", 5*time.Second, func() bool { _, ok := bob.World().Get("lamp"); return ok })
	}

	t.Run("writes to others' objects are refused", func(t *testing.T) {
		waitFor(t, "the proxy to know alice's rock", 5*time.Second, func() bool { _, ok := proxy.World().Get(rock); return ok })
		res, err := agent.Apply([]gameworld.Change{
			{Type: gameworld.Update, ID: rock, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"kind": json.RawMessage(`"gold"`)})},
			{Type: gameworld.Remove, ID: rock},
		})
		if err != nil || len(res.Records) != 0 || len(res.Refused) != 2 {
			t.Fatalf("forged writes: %+v, %v", res, err)
		}
		for _, rf := range res.Refused {
			if !errors.Is(rf.Err, ownership.ErrNotOwner) {
				t.Errorf("refused with %v, want ErrNotOwner", rf.Err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if o, _ := server.World().Get(rock); string(o.Properties.Value("kind")) != `"rock"` {
			t.Errorf("the rock changed: %s", o.Properties.Value("kind"))
		}
	})
	t.Run("bad property values are refused whole", func(t *testing.T) {
		if _, err := agent.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "bad", Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"x": json.RawMessage(`{`)})}}); err == nil {
			t.Fatal("invalid JSON accepted")
		}
	})
	t.Run("claimed identifiers", func(t *testing.T) {
		for _, id := range []string{agentID, proxy.Identifier(), bob.Identifier()} {
			if _, err := proxy.Attach(relay.AttachOptions{Identifier: id}); !errors.Is(err, relay.ErrIdentifierClaimed) {
				t.Errorf("attaching as %s: %v, want ErrIdentifierClaimed", id, err)
			}
		}
		if _, err := proxy.Attach(relay.AttachOptions{Identifier: "not an identifier"}); err == nil {
			t.Error("a malformed identifier was accepted")
		}
		client, err := relay.New(relay.Options{Role: ownership.Client})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(context.Background())
		if _, err := client.Attach(relay.AttachOptions{}); err == nil {
			t.Error("a client node accepted an attachment")
		}
	})

	t.Run("detach removes what the identifier owns", func(t *testing.T) {
		agent.Detach()
		agent.Detach()
		waitFor(t, "the lamp to go for everyone", 5*time.Second, func() bool {
			_, a := alice.World().Get("lamp")
			_, b := bob.World().Get("lamp")
			_, o := obs.get("lamp")
			return !a && !b && !o
		})
		if _, err := agent.Apply([]gameworld.Change{{Type: gameworld.Add, ID: "late"}}); err == nil {
			t.Error("a detached attachment still writes")
		}
		if _, ok := obs.get(rock); !ok {
			t.Error("alice's rock went too")
		}
	})
}
