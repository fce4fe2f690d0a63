package relay_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/relay"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/internal/wiretest"
	"github.com/solipsism/mesh/peer"
)

// TestAuthentication: with authentication on, a peer gets in only with a
// valid token, and claims only the identities it grants; HS256 and
// Ed25519 keys alike.
func TestAuthentication(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	pub, priv, _ := ed25519.GenerateKey(nil)
	hs, _ := auth.NewHS256(secret)
	ed, _ := auth.NewEd25519(pub)
	for _, c := range []struct {
		name string
		a    auth.Authenticator
		key  any
	}{{"HS256", hs, secret}, {"Ed25519", ed, priv}} {
		t.Run(c.name, func(t *testing.T) {
			_, url := startNode(t, relay.Options{Tick: 5 * time.Millisecond, Auth: c.a})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			issue := func(ids, prefixes []string, exp time.Duration) string {
				tok, err := auth.Issue(c.key, ids, prefixes, time.Now().Add(exp))
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			otherKey, _ := auth.Issue([]byte("another secret, 32 bytes or more!!"), []string{c1ID}, nil, time.Now().Add(time.Hour))
			for _, bad := range []struct{ name, token string }{
				{"none", ""},
				{"expired", issue([]string{c1ID}, nil, -time.Hour)},
				{"forged", otherKey},
				{"garbage", "not.a.token"},
			} {
				_, err := peer.Dial(ctx, url+"?token="+bad.token, peer.DialOptions{})
				var he *peer.HandshakeError
				if !errors.As(err, &he) || he.StatusCode != 401 {
					t.Errorf("%s token: %v, want HTTP 401", bad.name, err)
				}
			}
			// A token for other identities: in, but closed at its claim.
			conn, err := peer.Dial(ctx, url+"?token="+issue([]string{c2ID}, nil, time.Hour), peer.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			conn.CloseNow()
			wrong := wiretest.Dial(t, url+"?token="+issue([]string{c2ID}, nil, time.Hour), c1ID, wiretest.Options{})
			if code, _ := wrong.WaitClosed(5 * time.Second); code != websocket.StatusCode(4005) {
				t.Fatalf("a claim the token does not grant was closed with %d, want 4005", code)
			}
			// A valid token, by prefix, through the Go client.
			good, err := client.Dial(ctx, url, client.Options{Prefix: "player", Tick: 5 * time.Millisecond, Token: issue(nil, []string{"player"}, time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			defer good.Close()
			box, _ := good.Create(map[string]any{"ok": true})
			watcher := wiretest.Dial(t, url+"?token="+issue([]string{c0ID}, nil, time.Hour), c0ID, wiretest.Options{})
			watcher.WaitHas(box)
			// A proxy-like peer whose chain names an identity it was not
			// granted, and that does not speak refusals (the 2016 kind, or
			// a browser's worker), is closed, and writes nothing. (Our
			// proxies speak them: TestUpstreamRefusesOneWorld.)
			proxy := wiretest.Dial(t, url+"?token="+issue([]string{c2ID}, nil, time.Hour), c2ID, wiretest.Options{Chain: []string{c2ID, good.Identifier()}})
			if code, _ := proxy.WaitClosed(5 * time.Second); code != websocket.StatusCode(4005) {
				t.Fatalf("a chain with an ungranted identity was closed with %d, want 4005", code)
			}
			if _, ok := good.World().Get(box); !ok {
				t.Fatal("the box is gone")
			}
			// A prefix grants only identifiers of the documented form.
			bot := issue(nil, []string{"bot"}, time.Hour)
			for _, c := range []struct {
				id   string
				code websocket.StatusCode
			}{
				{"bot-vip-AAAAAAAA-BBBBBBBB", 4005}, {"bot-X-Y-Z", 4005}, {"bot-AAAAAAAA-BBBBBBBB/../x", 4005}, {"bot-", 4005},
				{"bot-AAAAAAAA-BBBBBBBB-CCCCCCCC", 4005}, {"bot-" + strings.Repeat("a", 40) + "-" + strings.Repeat("b", 40), 4005},
				// Longer than any identifier: bad metadata, whoever sends it.
				{"bot-" + strings.Repeat("a", 200) + "-" + strings.Repeat("b", 200), websocket.StatusInvalidFramePayloadData},
			} {
				p := wiretest.Dial(t, url+"?token="+bot, c.id, wiretest.Options{})
				if code, _ := p.WaitClosed(5 * time.Second); code != c.code {
					t.Errorf("a bot token claiming %.40q: closed with %d, want %d", c.id, code, c.code)
				}
			}
			ok := wiretest.Dial(t, url+"?token="+bot, "bot-AAAAAAAA-BBBBBBBB", wiretest.Options{})
			ok.WaitHas(box)
		})
	}
}
