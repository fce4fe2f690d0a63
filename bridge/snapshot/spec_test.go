package snapshot

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/peer"
)

// TestSpecVectors checks the values docs/bridges.md gives a client writer:
// the built-in types' layouts, hashes and GUIDs, the loaded digest, the
// prefix code, the packed and the compact examples.
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
	w.Reset()
	w.WriteCompact(0)
	w.WriteCompact(1)
	w.WriteCompact(17)
	w.WriteCompactInt(-6)
	b = hex.EncodeToString(w.Bytes())
	want = append(want, fmt.Sprintf("compact signed −6 are %d bits: bytes `%s %s %s`", w.Bits(), b[0:2], b[2:4], b[4:6]))
	for _, s := range want {
		if !strings.Contains(sec, s) {
			t.Errorf("docs/bridges.md lacks %s", s)
		}
	}
}

// TestHandshakeVector: the accept docs/bridges.md shows is ours, and a
// real server answers a connect and a response as the doc says.
func TestHandshakeVector(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bridges.md")
	if err != nil {
		t.Fatal(err)
	}
	var w Writer
	w.WriteBits(msgAccept, 8)
	w.WriteBits(0x12345678, 32)
	w.WriteBits(60, 16)
	w.WriteBytes([]byte("udppeer-AAAAAAAA-BBBBBBBB"))
	if flat := strings.NewReplacer(" ", "", "\n", "").Replace(string(doc)); !strings.Contains(flat, "accept"+hex.EncodeToString(w.Bytes())) {
		t.Errorf("docs/bridges.md lacks the accept\n%s", spaced(hex.EncodeToString(w.Bytes())))
	}

	p := startPlace(t, Options{})
	raw, err := net.DialUDP("udp", nil, p.srv.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	connect := make([]byte, 64)
	copy(connect, []byte{0x01, 0x78, 0x56, 0x34, 0x12, 0x02, 0x00})
	raw.Write(connect)
	buf := make([]byte, MaxPacket)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := raw.Read(buf)
	if err != nil || n != 21 || hex.EncodeToString(buf[:5]) != "0378563412" {
		t.Fatalf("challenge % x, %v", buf[:n], err)
	}
	raw.Write(append([]byte{0x04}, buf[1:21]...))
	if n, err = raw.Read(buf); err != nil || hex.EncodeToString(buf[:7]) != "05785634123c00" {
		t.Fatalf("accept % x, %v", buf[:n], err)
	}
	r := NewReader(buf[:n])
	r.ReadBits(8 + 32 + 16)
	id := string(r.ReadBytes(MaxStringBytes))
	if r.Err() != nil || r.Remaining() >= 8 || !strings.HasPrefix(id, "udppeer-") || !gameworld.IsIdentifier(id) {
		t.Fatalf("accept's identifier %q (%v, %d bits left)", id, r.Err(), r.Remaining())
	}
}

// TestInterestVector: docs/bridges.md's command with an interest decodes
// to what the text says, and encodes to the bytes it gives.
func TestInterestVector(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bridges.md")
	if err != nil {
		t.Fatal(err)
	}
	want := command{LocalTime: 1000, Tick: 6, AckTick: 9, Digest: digest(nil), Interest: &interestOf{Seq: 1,
		Interest: Interest{Boxes: []peer.Box{{Min: [3]float64{-10, -1, -10}, Max: [3]float64{10, 1, 10}}}, Rooms: []string{"red"}}}}
	var w Writer
	want.write(&w)
	hx := hex.EncodeToString(w.Bytes())
	flat := strings.NewReplacer(" ", "", "\n", "").Replace(string(doc))
	if !strings.Contains(flat, "interest:"+hx) {
		t.Fatalf("docs/bridges.md lacks the command\n%s", spaced(hx))
	}
	got, err := decodeCommand(w.Bytes())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, want)
	}
}

// TestCommandVector: docs/bridges.md's command with an elements update
// (version 2's operation 4) decodes to what the text says, and encodes to
// the bytes it gives.
func TestCommandVector(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bridges.md")
	if err != nil {
		t.Fatal(err)
	}
	want := command{LocalTime: 1000, Tick: 5, AckTick: 9, Digest: digest(nil), Updates: []update{
		{Op: opElements, ID: "grid", Seq: 7, Scope: "blocks", Props: []byte(`{"ver":0,"modified":{"1,2,3":{"t":"stone"}},"removed":["4,4,4"]}`)}}}
	var w Writer
	want.write(&w)
	hx := hex.EncodeToString(w.Bytes())
	flat := strings.NewReplacer(" ", "", "\n", "").Replace(string(doc))
	if !strings.Contains(flat, "command:"+hx) {
		t.Fatalf("docs/bridges.md lacks the command\n%s", spaced(hx))
	}
	got, err := decodeCommand(w.Bytes())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, want)
	}
}
