package alloverse

import (
	"encoding/json"
	"testing"
)

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"cmd":"intent","intent":{"ack_state_rev":12}}`,
		`{"cmd":"intent","intent":{"ack_state_rev":1e3,"xmovement":1}}`,
		`["interaction","request","me","place","1",["announce","version",3,"identity",{},"spawn_avatar",{}]]`,
		`["interaction","request","me","place","2",["change_components","e","add_or_change",{"a":1},"remove",["b"]]]`,
		`["interaction","request","me","place","3",["remove_entity","e","cascade"]]`,
		`["interaction","response","place","me","1",["announce","e","place","agent"]]`,
		`[]`, `{}`, `null`, `["interaction"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeFrame(b)
		if err != nil {
			return
		}
		if fr.AckOK && (!fr.Intent || fr.Ack > MaxRevision) {
			t.Fatalf("ack %d from %q", fr.Ack, b)
		}
		if fr.Interaction != nil && len(fr.Interaction.Body) == 0 {
			t.Fatalf("interaction without a body from %q", b)
		}
	})
}

// FuzzClientPacket feeds a client a good set, then an arbitrary packet:
// it never panics, and whatever it keeps is a JSON document with a valid
// revision.
func FuzzClientPacket(f *testing.F) {
	for _, s := range []string{
		`{"patch_style":"merge","patch_from":1,"entities":{"a":null,"b":{"id":"b","components":{}}},"revision":2}`,
		`{"patch_style":"apply","patch_from":1,"patches":[{"op":"replace","path":"/revision","value":2}]}`,
		`{"patch_style":"apply","patch_from":1,"patches":[{"op":"copy","from":"/entities","path":"/entities/a/x"},{"op":"replace","path":"/revision","value":3}]}`,
		`{"patch_style":"apply","patch_from":1,"patches":[{"op":"test","path":"/entities/a/components/t/00","value":[1]}]}`,
		`{"patch_style":"set","entities":{},"revision":0}`,
		`{"patch_style":"merge","patch_from":1,"revision":"x"}`,
		`{"patch_style":"apply","patch_from":7,"patches":[]}`,
		`{"patch_style":"apply","patch_from":1,"patches":[{"op":"add","path":"/entities/a/components/t/-","value":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		c := &Client{opts: ClientOptions{History: 4}, hist: map[uint64][]byte{}, changed: make(chan struct{})}
		c.state([]byte(`{"patch_style":"set","entities":{"a":{"id":"a","components":{"t":[1,2,{"k":null}]}}},"revision":1}`))
		c.state(pkt)
		doc, rev, ok := c.Document()
		if !ok {
			t.Fatal("lost the set")
		}
		if _, err := decodeJSON(doc); err != nil {
			t.Fatalf("kept a document that is not JSON: %q", doc)
		}
		if rev > MaxRevision {
			t.Fatalf("revision %d", rev)
		}
	})
}

// FuzzMergePatch: for any document and patch MergePatch never panics;
// what it returns is JSON, and applying the patch again changes nothing
// (a merge patch is idempotent).
func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1,"c":[1,null]},"d":"x"}`), []byte(`{"a":{"b":null,"e":{"f":null,"g":2}},"d":[3]}`))
	f.Add([]byte(`[1,2]`), []byte(`{"a":null}`))
	f.Add([]byte(`{"a":1}`), []byte(`"replaced"`))
	f.Add([]byte(`{"a":1,"a":2}`), []byte(` { "a" : { } } `))
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		once, err := MergePatch(doc, patch)
		if err != nil {
			return
		}
		if !json.Valid(once) {
			t.Fatalf("MergePatch(%q, %q) = %q, not JSON", doc, patch, once)
		}
		twice, err := MergePatch(once, patch)
		if err != nil || !sameJSON(twice, once) {
			t.Fatalf("patch %q applied again to %q gave %q (%v)", patch, once, twice, err)
		}
	})
}
