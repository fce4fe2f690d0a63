package snapshot

import (
	"context"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"
)

// TestDrainingRefusesClients: a node that drains takes no new snapshot
// client: a connect is answered with a disconnect of reason shutdown (the
// client tries again later, by then at a node that serves).
func TestDrainingRefusesClients(t *testing.T) {
	p := startPlace(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.node.Drain(ctx, relay.DrainOptions{}); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
	defer dcancel()
	if c, err := Dial(dctx, p.srv.Addr().String(), ClientOptions{}); err == nil {
		c.Close()
		t.Fatal("a draining node took a snapshot client")
	}
}
