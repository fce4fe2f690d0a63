package gameworld

import (
	"crypto/rand"
	"strings"
)

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomAlnum returns n random alphanumeric characters. It uses rejection
// sampling so that every character is equally likely.
func randomAlnum(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			panic("gameworld: crypto/rand failed: " + err.Error())
		}
		for _, b := range buf {
			if int(b) < 256-256%len(alnum) {
				out = append(out, alnum[int(b)%len(alnum)])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out)
}

// NewObjectID returns a fresh object id of the form XXXXXXXX-XXXXXXXX.
func NewObjectID() string {
	return randomAlnum(8) + "-" + randomAlnum(8)
}

// NewIdentifier returns a fresh world identifier of the form
// prefix-XXXXXXXX-XXXXXXXX. The prefix says what kind of peer the world is
// (server, proxy, client, webworker); an empty prefix yields just the id.
func NewIdentifier(prefix string) string {
	if prefix == "" {
		return NewObjectID()
	}
	return prefix + "-" + NewObjectID()
}

// IsIdentifier reports whether s has the recommended identifier form
// prefix-XXXXXXXX-XXXXXXXX (or XXXXXXXX-XXXXXXXX without a prefix), with X
// alphanumeric and the prefix made of alphanumeric words joined by dashes. Peers may use other forms; this is for validating our own
// configuration, not for refusing peers.
func IsIdentifier(s string) bool {
	if len(s) > MaxIdentifierLength {
		return false
	}
	parts := strings.Split(s, "-")
	if len(parts) < 2 {
		return false
	}
	a, b := parts[len(parts)-2], parts[len(parts)-1]
	if !isAlnum(a, 8) || !isAlnum(b, 8) {
		return false
	}
	if len(parts) == 2 {
		return true
	}
	for _, p := range parts[:len(parts)-2] {
		if p == "" || strings.Trim(p, alnum) != "" {
			return false
		}
	}
	return true
}

// IdentifierPrefix returns the prefix of an identifier of the form
// prefix-XXXXXXXX-XXXXXXXX (X alphanumeric, the prefix alphanumeric words
// joined by dashes), and false for any other string: this is the form a
// token's prefix grant covers, so "bot-vip-AAAAAAAA-BBBBBBBB" has the
// prefix "bot-vip", never "bot".
func IdentifierPrefix(s string) (string, bool) {
	if len(s) > MaxIdentifierLength || !IsIdentifier(s) || len(s) < 19 {
		return "", false
	}
	return s[:len(s)-18], true
}

// MaxIdentifierLength bounds the identifiers IsIdentifier accepts: a prefix
// of a few words and the 17 characters of the random part.
const MaxIdentifierLength = 128

func isAlnum(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(alnum, rune(s[i])) {
			return false
		}
	}
	return true
}
