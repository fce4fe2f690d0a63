package alloverse

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"
)

// TestDrainingRefusesAgents: a node that drains takes no new Alloverse
// client: the handshake is answered 503, saying why.
func TestDrainingRefusesAgents(t *testing.T) {
	p := startPlace(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.node.Drain(ctx, relay.DrainOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := DialClient(ctx, p.allo, ClientOptions{})
	if err == nil {
		c.Close()
		t.Fatal("a draining node took an Alloverse client")
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("refused with %v, want a 503", err)
	}
}
