package peer

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

// TestDigestVectors decodes the test vectors of docs/protocol.md
// ("Anti-entropy"): the hashes of two objects, and their digest message.
func TestDigestVectors(t *testing.T) {
	const owner = "client-8f3KQ2ab-Lm0c9Xz1"
	hex := func(v uint64) string { return fmt.Sprintf("%016x", v) }
	for _, c := range []struct {
		name, want string
		got        uint64
	}{
		{"IDHash", "b9f1336a9dd5969b", gameworld.IDHash("Zk3pQ0aa-9bLm2Xc1")},
		{"PropertyHash position", "a90bfe3bb1794e5e", gameworld.PropertyHash("position", []byte("[0,2,0]"))},
		{"PropertyHash color", "feaf32bd0d5e51b5", gameworld.PropertyHash("color", []byte(`"red"`))},
		{"props", "a7bb30f8bed7a013", gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage("[0,2,0]"), "color": json.RawMessage(`"red"`)}).Hash()},
		{"ObjectDigest", "6b9a9393622a34b0", gameworld.ObjectDigest(0xb9f1336a9dd5969b, owner, 0, 0xa7bb30f8bed7a013)},
		{"IDHash 2", "1cf2fe6bbafa9ad8", gameworld.IDHash("Ab12Cd34-Ef56Gh78")},
		{"ObjectDigest 2", "fa99da334e24952e", gameworld.ObjectDigest(0x1cf2fe6bbafa9ad8, owner, 3, gameworld.PropertyHash("n", []byte("1")))},
	} {
		if hex(c.got) != c.want {
			t.Errorf("%s = %s, want %s", c.name, hex(c.got), c.want)
		}
	}
	// The same objects in a world, and the digest message of them.
	w := gameworld.New("w")
	w.Apply([]gameworld.Change{
		{Type: gameworld.Add, ID: "Zk3pQ0aa-9bLm2Xc1", Owner: owner, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"position": json.RawMessage("[0,2,0]"), "color": json.RawMessage(`"red"`)})},
		{Type: gameworld.Add, ID: "Ab12Cd34-Ef56Gh78", Owner: owner, Epoch: 3, Properties: gameworld.PropertiesOf(map[string]json.RawMessage{"n": json.RawMessage("1")})},
	}, nil)
	d := Digest{Buckets: make([]uint64, 2)}
	w.RangeDigests(func(_ uint32, _ string, idHash, digest uint64) bool {
		d.Buckets[idHash%2] ^= digest
		d.Count++
		return true
	})
	const doc = `["digest",{"count":2,"buckets":["fa99da334e24952e","6b9a9393622a34b0"]}]`
	if got := string(AppendDigest(nil, d)); got != doc {
		t.Fatalf("digest message %s, want %s", got, doc)
	}
	m, err := DecodeMessage([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeDigest(m.Data)
	if err != nil || back.Count != 2 || back.Buckets[0] != d.Buckets[0] || back.Buckets[1] != d.Buckets[1] {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	for _, c := range []struct{ in, typ string }{
		{`["requestRepair",{"of":2,"buckets":[1]}]`, TypeRequestRepair},
		{`["repairing",{"of":2,"buckets":[0,1]}]`, TypeRepairing},
		{`["repaired",{"of":2,"buckets":[0,1]}]`, TypeRepaired},
	} {
		m, err := DecodeMessage([]byte(c.in))
		if err != nil || m.Type != c.typ {
			t.Fatalf("%s: %v", c.in, err)
		}
		r, err := DecodeRepair(m.Data)
		if err != nil || string(AppendRepair(nil, c.typ, r)) != c.in {
			t.Fatalf("%s: %+v, %v, re-encoded %s", c.in, r, err, AppendRepair(nil, c.typ, r))
		}
	}
}
