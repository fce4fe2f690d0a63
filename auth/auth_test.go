package auth

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestAuthenticate(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	hs, _ := NewHS256(secret)
	pub, priv, _ := ed25519.GenerateKey(nil)
	ed, _ := NewEd25519(pub)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	hour := time.Now().Add(time.Hour)
	tok := func(key any, ids, prefixes []string, exp time.Time) string {
		s, err := Issue(key, ids, prefixes, exp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name  string
		a     Authenticator
		token string
		err   error
		allow string
		deny  string
	}{
		{"HS256 identifiers", hs, tok(secret, []string{"client-1"}, nil, hour), nil, "client-1", "client-2"},
		{"HS256 prefix", hs, tok(secret, nil, []string{"player"}, hour), nil, "player-abcdefgh-12345678", "playerx-abcdefgh-12345678"},
		{"Ed25519", ed, tok(priv, []string{"a"}, nil, hour), nil, "a", "b"},
		{"Ed25519 signed by another key", ed, tok(otherPriv, []string{"a"}, nil, hour), ErrInvalid, "", ""},
		{"expired", hs, tok(secret, []string{"a"}, nil, time.Now().Add(-time.Hour)), ErrInvalid, "", ""},
		{"HS256 token for an Ed25519 node", ed, tok(secret, []string{"a"}, nil, hour), ErrInvalid, "", ""},
		{"grants nothing", hs, tok(secret, nil, nil, hour), ErrInvalid, "", ""},
		{"missing", hs, "", ErrMissing, "", ""},
		{"garbage", hs, "x.y.z", ErrInvalid, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := c.a.Authenticate(c.token)
			if !errors.Is(err, c.err) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if err != nil {
				return
			}
			if !g.Allows(c.allow) || g.Allows(c.deny) {
				t.Fatalf("grant %+v: allows %q %v, %q %v", g, c.allow, g.Allows(c.allow), c.deny, g.Allows(c.deny))
			}
		})
	}
	if _, err := NewHS256([]byte("short")); err == nil {
		t.Error("a short secret was accepted")
	}
}

// A prefix grants identifiers of exactly the documented form, and nothing
// a client could pass off as one.
func TestPrefixGrantForm(t *testing.T) {
	g := &Grant{Prefixes: []string{"bot"}, Identifiers: []string{"bot-vip-AAAAAAAA-BBBBBBBB"}}
	long := strings.Repeat("a", 200)
	for _, c := range []struct {
		id    string
		allow bool
	}{
		{"bot-AAAAAAAA-BBBBBBBB", true},
		{"bot-12345678-abcdefgh", true},
		{"bot-vip-AAAAAAAA-BBBBBBBB", true}, // named exactly
		{"bot-vip-CCCCCCCC-DDDDDDDD", false},
		{"bot-AAAAAAAA-BBBBBBBB-CCCCCCCC", false},
		{"bot-X-Y-Z", false},
		{"bot-AAAAAAAA-BBBBBBBB/../x", false},
		{"bot-AAAAAAAA-BBBBBBB/", false},
		{"bot-", false},
		{"bot", false},
		{"bot-AAAAAAAA-", false},
		{"bot--AAAAAAAA-BBBBBBBB", false},
		{"bot-" + long + "-" + long, false},
		{"bot-AAAAAAAA-BBBBBBBBB", false},
		{"bot-AAAAAAAA-BBBBBBB\u00e9", false},
		{"botx-AAAAAAAA-BBBBBBBB", false},
		{"AAAAAAAA-BBBBBBBB", false},
	} {
		if got := g.Allows(c.id); got != c.allow {
			t.Errorf("Allows(%q) = %v, want %v", c.id, got, c.allow)
		}
	}
}

func ExampleIssue() {
	secret := []byte("a secret of thirty-two bytes or more")
	token, _ := Issue(secret, nil, []string{"player"}, time.Now().Add(time.Hour))
	a, _ := NewHS256(secret)
	g, _ := a.Authenticate(token)
	fmt.Println(g.Allows("player-0f0f0f0f-abcdabcd"), g.Allows("admin-0f0f0f0f-abcdabcd"))
	// Output: true false
}
