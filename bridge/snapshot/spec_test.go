package snapshot

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSpecVectors checks the values docs/bridges.md gives a client writer:
// the built-in types' layouts, hashes and GUIDs, the loaded digest, the
// prefix code and the packed example.
func TestSpecVectors(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bridges.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	want := []string{fmt.Sprintf("and the digest of both loaded (`generic`, then `transform`) is `%08x`", digest([]uint32{GenericType.Hash(), TransformType.Hash()}))}
	for _, ty := range []GhostType{GenericType, TransformType} {
		g := ty.GUID()
		want = append(want, fmt.Sprintf("| `%s` | `%s` | `%08x` | `%x` |", ty.Name, strings.ReplaceAll(ty.layout(), "|", `\|`), ty.Hash(), g[:]))
	}
	for b := range codes {
		want = append(want, fmt.Sprintf("| %d | `%0*b` | %d |", b, codeLengths[b], codes[b], bucketSizes[b]))
	}
	var w Writer
	w.WritePacked(0)
	w.WritePacked(1)
	w.WritePacked(17)
	w.WritePackedInt(-6)
	b := hex.EncodeToString(w.Bytes())
	want = append(want, fmt.Sprintf("are %d bits: bytes `%s %s %s`", w.Bits(), b[0:2], b[2:4], b[4:6]))
	for _, s := range want {
		if !strings.Contains(sec, s) {
			t.Errorf("docs/bridges.md lacks %s", s)
		}
	}
}
