package membership_test

import (
	"strings"
	"testing"

	"github.com/solipsism/mesh/membership"
)

func FuzzParseMeta(f *testing.F) {
	for _, s := range []string{`{"id":"server-AAAAAAAA-BBBBBBBB","url":"ws://127.0.0.1:8080/ws"}`, `{"id":"x","url":"http://x","leaving":true}`, `{}`, `null`, `[`, `{"id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, url, _, err := membership.ParseMeta(b)
		if err != nil {
			return
		}
		if id == "" || !(strings.HasPrefix(url, "ws://") || strings.HasPrefix(url, "wss://")) {
			t.Fatalf("accepted %q as %q %q", b, id, url)
		}
	})
}
