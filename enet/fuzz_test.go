package enet

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

func FuzzDecode(f *testing.F) {
	c := command{kind: cmdConnect, flags: flagAcknowledge, channel: 0xFF, seq: 1, mtu: 1400, windowSize: 65536, channelCount: 6, connectID: 7}
	f.Add(appendCommand(appendHeader(nil, maxPeerID, 0, true, 5), &c))
	d := command{kind: cmdSendFragment, flags: flagAcknowledge, channel: 1, seq: 3, startSeq: 3, fragmentCount: 2, totalLength: 10, payload: []byte("hello")}
	f.Add(appendCommand(appendHeader(nil, 0, 1, true, 9), &d))
	f.Add([]byte{0x80, 0, 0, 1, 6, 1, 0, 1, 0, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, p []byte) {
		_, cmds, _ := decode(p)
		for i := range cmds {
			// Every command re-encodes to the bytes it came from.
			if got := appendCommand(nil, &cmds[i]); len(got) != cmds[i].wireSize() {
				t.Fatalf("command %d re-encodes to %d bytes, size %d", cmds[i].kind, len(got), cmds[i].wireSize())
			}
		}
	})
}

// FuzzPeer feeds a connected peer arbitrary datagrams: no panic, and the
// memory it holds stays within its bound.
func FuzzPeer(f *testing.F) {
	d := command{kind: cmdSendFragment, flags: flagAcknowledge, channel: 1, seq: 5, startSeq: 5, fragmentCount: 3, totalLength: 1 << 20, payload: []byte("xyz")}
	f.Add(appendCommand(appendHeader(nil, 0, 0, true, 9), &d))
	u := command{kind: cmdSendUnsequenced, flags: flagUnsequenced, channel: 0, unsequencedGroup: 700, payload: []byte("u")}
	f.Add(appendCommand(appendHeader(nil, 0, 0, false, 0), &u))
	r := command{kind: cmdSendReliable, flags: flagAcknowledge, channel: 1, seq: 1, payload: []byte("r")}
	f.Add(appendCommand(appendCommand(appendHeader(nil, 0, 0, true, 3), &r), &command{kind: cmdSendUnreliableFragment, channel: 1, seq: 1, startSeq: 1, fragmentCount: 2, totalLength: 4, payload: []byte("ab")}))
	f.Fuzz(func(t *testing.T, p []byte) {
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Skip(err)
		}
		defer conn.Close()
		h := &Host{conn: conn, opts: Options{MaxWaitingData: 1 << 16, MaxPacketSize: 1 << 16}, start: time.Now(),
			byConnect: map[connKey]*Peer{}, accept: make(chan *Peer, 1)}
		h.opts.defaults(true)
		h.peers = make([]*Peer, 2)
		addr := netip.MustParseAddrPort("127.0.0.1:9")
		h.mu.Lock()
		peer := h.newPeerLocked(addr, 0)
		peer.state, peer.channels, peer.outgoingPeerID = stateConnected, newChannels(4), 1
		h.mu.Unlock()
		h.receive(addr, p)
		h.mu.Lock()
		defer h.mu.Unlock()
		if peer.waiting > h.opts.MaxWaitingData && peer.state != stateDisconnected {
			t.Fatalf("the peer holds %d bytes", peer.waiting)
		}
	})
}

// TestFloods: garbage and half-open connects from many sources neither
// grow the host without bound nor disturb a connected peer.
func TestFloods(t *testing.T) {
	h, err := Listen("127.0.0.1:0", Options{MaxPeers: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for {
			p, err := h.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				for {
					pk, err := p.Receive(ctx)
					if err != nil {
						return
					}
					p.Send(pk.Channel, pk.Data, Reliable) // echo
				}
			}()
		}
	}()
	good, err := Dial(ctx, h.Addr().String(), Options{Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	sa := h.Addr().(*net.UDPAddr)
	for i := range 200 {
		c, err := net.DialUDP("udp", nil, sa)
		if err != nil {
			t.Fatal(err)
		}
		// A connect that never completes, and garbage.
		cmd := command{kind: cmdConnect, flags: flagAcknowledge, channel: 0xFF, seq: 1, mtu: 1400, windowSize: 65536, channelCount: 6, connectID: uint32(i)}
		c.Write(appendCommand(appendHeader(nil, maxPeerID, 0, true, 1), &cmd))
		c.Write([]byte{byte(i), 0xff, 0x13, 0x37, 6, 0, 0, 1, 0xff, 0xff})
		c.Write(appendCommand(appendHeader(nil, uint16(i%16), 0, true, 1), &command{kind: cmdSendFragment, flags: flagAcknowledge, channel: 0, seq: 1, startSeq: 1, fragmentCount: 1000, totalLength: 30 << 20, payload: []byte("x")}))
		c.Close()
		if i%20 == 0 {
			if err := good.Send(1, []byte("still here"), Reliable); err != nil {
				t.Fatal(err)
			}
			pk, err := good.Receive(ctx)
			if err != nil || string(pk.Data) != "still here" {
				t.Fatalf("the connected peer was disturbed: %v", err)
			}
		}
	}
	h.mu.Lock()
	n := 0
	for _, p := range h.peers {
		if p != nil {
			n++
		}
	}
	h.mu.Unlock()
	if n > 16 {
		t.Fatalf("%d peers held", n)
	}
	var ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	if grow := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc); grow > 8<<20 {
		t.Fatalf("the floods grew the heap by %d bytes", grow)
	}
}
