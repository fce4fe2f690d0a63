package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/solipsism/mesh/auth"
)

// runToken serves "solipsism-node token": it signs a token for a node
// started with --auth-key, granting identifiers and prefixes until it
// expires, and prints it.
func runToken(args []string, now time.Time, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("solipsism-node token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("key", "", "the signing key: the HS256 secret the node's --auth-key names (hex or base64, decoded to its bytes before signing, as the node decodes it), or ed25519:<base64 private key> for a node started with ed25519:<public key>")
	keyFile := fs.String("key-file", "", "a file holding --key (e.g. the node's --auth-key-file)")
	sub := fs.String("sub", "", "an identifier the token grants (the JWT subject), e.g. client-8f3KQ2ab-Lm0c9Xz1")
	ids := fs.String("id", "", "more identifiers, comma-separated")
	prefixes := fs.String("prefix", "", "comma-separated prefixes: the token grants every identifier prefix-XXXXXXXX-XXXXXXXX of them (what clients that make up their identifier need)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	admin := fs.Bool("admin", false, "let the holder read the admin endpoints (/api/state, /inspect, /metrics, profiles)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: solipsism-node token --key K|--key-file F [--sub ID] [--id ID,...] [--prefix P,...] [--admin] [--ttl 24h]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *keyFile != "" {
		if *key != "" {
			return errors.New("token: --key and --key-file: give one of them")
		}
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("token: --key-file: %w", err)
		}
		*key = strings.TrimSpace(string(b))
	}
	if *key == "" {
		return errors.New("token: --key (or --key-file) is required")
	}
	grants := split(*ids)
	if *sub != "" {
		grants = append([]string{*sub}, grants...)
	}
	if len(grants) == 0 && len(split(*prefixes)) == 0 && !*admin {
		return errors.New("token: grant something: --sub, --id, --prefix or --admin")
	}
	if *ttl <= 0 {
		return errors.New("token: --ttl must be positive (tokens must expire)")
	}
	k, err := signingKey(*key)
	if err != nil {
		return fmt.Errorf("token: --key: %w", err)
	}
	tok, err := auth.IssueGrant(k, auth.Grant{Identifiers: grants, Prefixes: split(*prefixes), Admin: *admin, Expires: now.Add(*ttl)})
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// signingKey decodes a --key as --auth-key does: ed25519:<base64> for an
// Ed25519 private key (64 bytes, or its 32-byte seed), else an HS256
// secret in hex or base64.
func signingKey(s string) (any, error) {
	if b64, ok := strings.CutPrefix(s, "ed25519:"); ok {
		b, err := base64.StdEncoding.DecodeString(b64)
		switch {
		case err != nil:
			return nil, errors.New("the Ed25519 private key is not base64")
		case len(b) == ed25519.SeedSize:
			return ed25519.NewKeyFromSeed(b), nil
		case len(b) == ed25519.PrivateKeySize:
			return ed25519.PrivateKey(b), nil
		}
		return nil, fmt.Errorf("an Ed25519 private key has 32 (seed) or 64 bytes, not %d", len(b))
	}
	b, err := hmacSecret(s)
	if err != nil {
		return nil, err
	}
	if len(b) < 32 {
		return nil, errors.New("an HS256 secret needs at least 32 bytes")
	}
	return b, nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
