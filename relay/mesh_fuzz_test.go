package relay_test

import (
	"strings"
	"testing"

	"github.com/solipsism/mesh/relay"
)

func FuzzParseNodeMeta(f *testing.F) {
	for _, s := range []string{`{"id":"server-AAAAAAAA-BBBBBBBB","url":"ws://127.0.0.1:8080/ws"}`, `{"id":"x","url":"http://x"}`, `{}`, `null`, `[`, `{"id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := relay.ParseNodeMeta(b)
		if err != nil {
			return
		}
		if m.ID == "" || !(strings.HasPrefix(m.URL, "ws://") || strings.HasPrefix(m.URL, "wss://")) {
			t.Fatalf("accepted %q as %+v", b, m)
		}
	})
}
