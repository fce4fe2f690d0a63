package snapshot

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestOutdated: a real server answers a connect of another wire version
// (0: a client from before versions, or a newer one) with the 4-byte
// disconnect of reason 7 naming its own, and nothing else; the docs give
// both vectors.
func TestOutdated(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bridges.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.NewReplacer(" ", "", "\n", "").Replace(string(doc))
	for _, v := range []string{"connect0178563412" + "0300", "outdated07070300"} {
		if !strings.Contains(flat, v) {
			t.Errorf("docs/bridges.md lacks the vector %s", v)
		}
	}
	p := startPlace(t, Options{})
	raw, err := net.DialUDP("udp", nil, p.srv.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	buf := make([]byte, MaxPacket)
	for _, v := range []uint16{0, Version + 1, 0xffff} {
		connect := make([]byte, connectSize)
		copy(connect, []byte{msgConnect, 0x78, 0x56, 0x34, 0x12})
		binary.LittleEndian.PutUint16(connect[5:], v)
		raw.Write(connect)
		raw.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := raw.Read(buf)
		if err != nil || hex.EncodeToString(buf[:n]) != "07070300" {
			t.Fatalf("version %d: answered % x, %v; want 07 07 03 00", v, buf[:n], err)
		}
		raw.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := raw.Read(buf); err == nil {
			t.Fatalf("version %d: then % x", v, buf[:n])
		}
	}
}

// TestClientReportsOutdated: the Go client, refused by a server of
// another version (a real UDP socket answering as one would), reports it
// as such, with both versions, and does not retry.
func TestClientReportsOutdated(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	connects := make(chan []byte, 16)
	go func() {
		buf := make([]byte, MaxPacket)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			connects <- append([]byte(nil), buf[:n]...)
			srv.WriteToUDP([]byte{msgDisconnect, ReasonOutdated, 4, 0}, from)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Dial(ctx, srv.LocalAddr().String(), ClientOptions{})
	var oe *OutdatedError
	if !errors.As(err, &oe) || oe.Server != 4 || !errors.Is(err, ErrDisconnected) || !strings.Contains(err.Error(), "version 4, this client 3") {
		t.Fatalf("Dial: %v", err)
	}
	c := <-connects
	if len(c) != connectSize || c[0] != msgConnect || binary.LittleEndian.Uint16(c[5:]) != Version {
		t.Fatalf("the client's connect: % x", c)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(connects); n != 0 {
		t.Errorf("the client connected %d more times after the refusal", n)
	}
}

// TestVersionOneServed: a client of wire version 1 (2-bit update
// operations, from before block writes) still connects and writes: its
// commands are read as version 1's, and its set reaches the node.
func TestVersionOneServed(t *testing.T) {
	p := startPlace(t, Options{})
	raw, err := net.DialUDP("udp", nil, p.srv.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	connect := make([]byte, connectSize)
	copy(connect, []byte{msgConnect, 0x78, 0x56, 0x34, 0x12, 0x01, 0x00})
	raw.Write(connect)
	buf := make([]byte, MaxPacket)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := raw.Read(buf)
	if err != nil || n != 21 || buf[0] != msgChallenge {
		t.Fatalf("challenge % x, %v", buf[:n], err)
	}
	raw.Write(append([]byte{msgResponse}, buf[1:21]...))
	if n, err = raw.Read(buf); err != nil || buf[0] != msgAccept {
		t.Fatalf("accept % x, %v", buf[:n], err)
	}
	// A set and a remove of an unknown id, as a version 1 client writes
	// them: 2-bit operations.
	cmd := command{Tick: 1, Digest: digest(nil), Updates: []update{{ID: "v1-crate", Props: []byte(`{"kind":"crate","n":1}`)}, {ID: "nothing", Op: opRemove}}}
	var w Writer
	cmd.writeVersion(&w, 1)
	raw.Write(w.Bytes())
	deadline := time.Now().Add(5 * time.Second)
	for {
		if o, ok := p.node.World().Get("v1-crate"); ok && string(o.Properties.Value("n")) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a version 1 client's set never reached the node")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
