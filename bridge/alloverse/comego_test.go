package alloverse

import (
	"fmt"
	"testing"
	"time"
)

// TestClientsComeAndGo: while a Solipsism client keeps changing objects,
// Alloverse clients connect and leave again and again, the place often
// left with none (the bridge then asks the node for nothing). Each
// newcomer, and the bridge's document, ends with the node's world.
func TestClientsComeAndGo(t *testing.T) {
	p := startPlace(t, Options{})
	writer := p.solipsist(t, "writer")
	var ids []string
	for i := range 200 {
		id, err := writer.Create(map[string]any{"n": 0, "i": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			writer.Set(ids[n%len(ids)], map[string]any{"n": n})
			time.Sleep(time.Millisecond)
		}
	}()
	for round := range 20 {
		c := p.agent(t, ClientOptions{})
		waitFor(t, fmt.Sprint("round ", round, ": a document"), 10*time.Second, func() bool { _, _, ok := c.Document(); return ok })
		time.Sleep(time.Duration(round%4) * 10 * time.Millisecond)
		c.Close()
		time.Sleep(time.Duration(round%3) * 15 * time.Millisecond)
	}
	close(stop)
	<-done
	c := p.agent(t, ClientOptions{})
	want := func() map[string]string {
		out := map[string]string{}
		for _, o := range writer.World().Objects() {
			out[o.ID] = string(o.Properties.Value("n"))
		}
		return out
	}()
	waitFor(t, "the newcomer holds the writer's world", 10*time.Second, func() bool {
		doc, _, ok := c.Document()
		if !ok {
			return false
		}
		ents := entities(t, doc)
		for id, n := range want {
			if string(ents[id]["n"]) != n {
				return false
			}
		}
		return true
	})
	caughtUp(t, p, c)
}
