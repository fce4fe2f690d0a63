package snapshot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/auth"
)

// TestAuthentication: a UDP client needs a valid token in its handshake;
// its identifier takes the prefix the token grants.
func TestAuthentication(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, _ := auth.NewHS256(secret)
	p := startPlace(t, Options{Auth: a})
	good, _ := auth.Issue(secret, nil, []string{"engine"}, time.Now().Add(time.Hour))
	other, _ := auth.Issue([]byte("another secret, 32 bytes or more!!"), nil, []string{"engine"}, time.Now().Add(time.Hour))
	for _, tok := range []string{"", other} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if c, err := Dial(ctx, p.srv.Addr().String(), ClientOptions{Token: tok}); err == nil {
			c.Close()
			t.Errorf("token %q: connected", tok)
		}
		cancel()
	}
	if clients(p.srv) != 0 {
		t.Fatal("a refused client is held")
	}
	c := dial(t, p.srv.Addr().String(), ClientOptions{Token: good})
	if !strings.HasPrefix(c.Identifier(), "engine-") {
		t.Fatalf("identifier %s", c.Identifier())
	}
}
