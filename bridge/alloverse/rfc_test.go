package alloverse

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fixtures holds the RFC test vectors.
const fixtures = "testdata"

type patchCase struct {
	Comment  string          `json:"comment"`
	Doc      json.RawMessage `json:"doc"`
	Patch    json.RawMessage `json:"patch"`
	Expected json.RawMessage `json:"expected"`
	Error    string          `json:"error"`
	Disabled bool            `json:"disabled"`
}

func loadCases(t *testing.T, name string) []patchCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatalf("test vectors: %v", err)
	}
	var cases []patchCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// sameJSON compares two JSON texts by value.
func sameJSON(a, b []byte) bool {
	x, err1 := decodeJSON(a)
	y, err2 := decodeJSON(b)
	return err1 == nil && err2 == nil && jsonEqual(x, y)
}

// TestRFC6902Suite runs every case of json-patch-tests and the RFC's own
// examples, the ones the suite marks disabled included, through
// ApplyPatch: each expected document comes out, and each case the RFC
// makes an error is refused (including the six that evanphx/json-patch
// gets wrong by default).
func TestRFC6902Suite(t *testing.T) {
	for _, file := range []string{"json-patch-tests.json", "json-patch-spec_tests.json"} {
		for i, c := range loadCases(t, file) {
			t.Run(fmt.Sprintf("%s#%d %s", file, i, c.Comment), func(t *testing.T) {
				out, err := ApplyPatch(c.Doc, c.Patch)
				if c.Expected == nil && c.Error == "" {
					c.Expected = c.Doc // a test that must pass
				}
				if c.Expected == nil {
					if err == nil {
						t.Fatalf("want an error (%s), got %s", c.Error, out)
					}
					return
				}
				if err != nil {
					t.Fatalf("error %v, want %s", err, c.Expected)
				}
				if !sameJSON(out, c.Expected) {
					t.Fatalf("got %s, want %s", out, c.Expected)
				}
			})
		}
	}
}

// TestRFC7396AppendixA runs the RFC's examples through MergePatch.
func TestRFC7396AppendixA(t *testing.T) {
	for i, c := range loadCases(t, "rfc7396-appendixA.json") {
		t.Run(fmt.Sprintf("%d %s", i, c.Comment), func(t *testing.T) {
			out, err := MergePatch(c.Doc, c.Patch)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(out, c.Expected) {
				t.Fatalf("got %s, want %s", out, c.Expected)
			}
		})
	}
}

// TestMergePatchBigPlace: a patch that removes half the entities of a
// place and changes the others gives, entity by entity, what the RFC says.
func TestMergePatchBigPlace(t *testing.T) {
	const n = 20000
	doc, patch := placeDoc(n)
	out, err := MergePatch(doc, patch)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Entities map[string]struct {
			ID         string
			Components map[string]json.RawMessage
		}
		Revision int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Entities) != n/2 || got.Revision != 2 {
		t.Fatalf("%d entities at revision %d, want %d at 2", len(got.Entities), got.Revision, n/2)
	}
	for i := 1; i < n; i += 2 {
		e := got.Entities[fmt.Sprintf("e-%d", i)]
		if e.ID != fmt.Sprintf("e-%d", i) || string(e.Components["n"]) != fmt.Sprint(-i) || string(e.Components["position"]) != fmt.Sprintf("[%d,0,%d]", i%100, i/100) {
			t.Fatalf("entity e-%d: %+v", i, e)
		}
	}
}
