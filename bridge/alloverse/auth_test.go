package alloverse

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/auth"
)

// TestAuthentication: with authentication on, WebSocket clients need a
// token on the handshake and ENet clients in their announce; the agent's
// identifier takes the prefix the token grants.
func TestAuthentication(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, _ := auth.NewHS256(secret)
	p := startPlace(t, Options{Auth: a})
	addr := startENet(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good, _ := auth.Issue(secret, nil, []string{"visor"}, time.Now().Add(time.Hour))
	expired, _ := auth.Issue(secret, nil, []string{"visor"}, time.Now().Add(-time.Hour))

	for _, tok := range []string{"", expired, "forged.token.here"} {
		if c, err := DialClient(ctx, p.allo, ClientOptions{Token: tok}); err == nil {
			c.Close()
			t.Errorf("token %q: connected", tok)
		}
	}
	c, err := DialClient(ctx, p.allo, ClientOptions{Token: good})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, agent, err := c.Announce(ctx, map[string]any{}); err != nil || !strings.HasPrefix(agent, "visor-") {
		t.Fatalf("announce: %s %v", agent, err)
	}

	e, err := DialENetClient(ctx, addr, ClientOptions{Token: expired})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Announce(ctx, map[string]any{}); err == nil {
		t.Fatal("an ENet agent with an expired token announced")
	}
	e.Close()
	e, err = DialENetClient(ctx, addr, ClientOptions{Token: good})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, agent, err := e.Announce(ctx, map[string]any{}); err != nil || !strings.HasPrefix(agent, "visor-") {
		t.Fatalf("ENet announce: %s %v", agent, err)
	}
}
