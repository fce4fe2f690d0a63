package auth

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/solipsism/mesh/gameworld"
)

// Grant is what a valid token allows.
type Grant struct {
	// Identifiers the holder may claim exactly, and prefixes of those it
	// may claim: an identifier of exactly the form prefix-XXXXXXXX-XXXXXXXX
	// (X alphanumeric) matches the prefix "prefix"; "prefix-vip-…",
	// "prefix-" or a longer tail does not (see gameworld.IdentifierPrefix).
	Identifiers []string
	Prefixes    []string
	Expires     time.Time
	// Admin holders may read a node's admin endpoints (its state, the
	// inspector, metrics, profiles).
	Admin bool
}

// Allows reports whether the grant covers the identifier id.
func (g *Grant) Allows(id string) bool {
	if g == nil {
		return true // authentication off
	}
	for _, x := range g.Identifiers {
		if x == id {
			return true
		}
	}
	if len(g.Prefixes) == 0 {
		return false
	}
	prefix, ok := gameworld.IdentifierPrefix(id)
	if !ok {
		return false
	}
	for _, p := range g.Prefixes {
		if p == prefix {
			return true
		}
	}
	return false
}

// Prefix returns a prefix the grant allows for fresh identifiers, or
// fallback if the grant is nil (authentication off). ok is false when the
// grant allows no fresh identifiers.
func (g *Grant) Prefix(fallback string) (prefix string, ok bool) {
	if g == nil {
		return fallback, true
	}
	for _, p := range g.Prefixes {
		if p == fallback {
			return p, true
		}
	}
	if len(g.Prefixes) > 0 {
		return g.Prefixes[0], true
	}
	return "", false
}

// Authenticator checks tokens. Its methods are safe for concurrent use.
type Authenticator interface {
	// Authenticate returns what a token grants, or why it is refused.
	Authenticate(token string) (*Grant, error)
}

// Errors Authenticate returns.
var (
	ErrMissing = errors.New("auth: no token")
	ErrInvalid = errors.New("auth: invalid token")
)

// claims are a token's claims: the standard ones, and the identifiers
// ("ids") and prefixes ("prefixes") it grants.
type claims struct {
	jwt.RegisteredClaims
	IDs      []string `json:"ids,omitempty"`
	Prefixes []string `json:"prefixes,omitempty"`
	Admin    bool     `json:"admin,omitempty"`
}

// JWT checks JSON Web Tokens signed with HS256 or EdDSA.
type JWT struct {
	hmac    []byte
	ed      ed25519.PublicKey
	edPriv  ed25519.PrivateKey
	methods []string
}

// NewHS256 returns an Authenticator for tokens signed with secret (at least
// 32 bytes).
func NewHS256(secret []byte) (*JWT, error) {
	if len(secret) < 32 {
		return nil, errors.New("auth: an HS256 secret needs at least 32 bytes")
	}
	return &JWT{hmac: secret, methods: []string{"HS256"}}, nil
}

// NewEd25519 returns an Authenticator for tokens signed with the private
// key of pub.
func NewEd25519(pub ed25519.PublicKey) (*JWT, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("auth: an Ed25519 public key has 32 bytes")
	}
	return &JWT{ed: pub, methods: []string{"EdDSA"}}, nil
}

// Authenticate implements Authenticator. A token must expire.
func (j *JWT) Authenticate(token string) (*Grant, error) {
	if token == "" {
		return nil, ErrMissing
	}
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if j.hmac != nil {
			return j.hmac, nil
		}
		return j.ed, nil
	}, jwt.WithValidMethods(j.methods), jwt.WithExpirationRequired(), jwt.WithLeeway(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	g := &Grant{Identifiers: c.IDs, Prefixes: c.Prefixes, Expires: c.ExpiresAt.Time, Admin: c.Admin}
	if c.Subject != "" {
		g.Identifiers = append(g.Identifiers, c.Subject)
	}
	if len(g.Identifiers) == 0 && len(g.Prefixes) == 0 && !g.Admin {
		return nil, fmt.Errorf("%w: it grants no identifiers", ErrInvalid)
	}
	return g, nil
}

// Issue signs a token granting ids and prefixes until exp, with an HS256
// secret or an Ed25519 private key: for tools and tests.
func Issue(key any, ids, prefixes []string, exp time.Time) (string, error) {
	return IssueGrant(key, Grant{Identifiers: ids, Prefixes: prefixes, Expires: exp})
}

// IssueGrant signs a token for g (its Expires is required).
func IssueGrant(key any, g Grant) (string, error) {
	c := claims{RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(g.Expires), IssuedAt: jwt.NewNumericDate(time.Now())},
		IDs: g.Identifiers, Prefixes: g.Prefixes, Admin: g.Admin}
	switch k := key.(type) {
	case []byte:
		return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(k)
	case ed25519.PrivateKey:
		return jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(k)
	}
	return "", errors.New("auth: key must be an HS256 secret or an Ed25519 private key")
}

// FromRequest returns the token of an HTTP request: the "token" query
// parameter (browsers cannot set WebSocket headers) or a bearer
// Authorization header.
func FromRequest(r *http.Request) string {
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimPrefix(h, "Bearer ")
	}
	return ""
}
