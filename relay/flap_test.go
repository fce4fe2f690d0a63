package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/relay"

	"github.com/solipsism/mesh/internal/wiretest"
)

// cutter forwards TCP connections to a target and can cut them all at once,
// without a close handshake, as a broken network would.
type cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); c.cut() })
	return c
}

func (c *cutter) url() string { return "ws://" + c.ln.Addr().String() + "/ws" }

// cut drops every forwarded connection.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not a graceful FIN
		}
		conn.Close()
	}
	c.conns = nil
}

// removesOf counts the remove records of id a peer received.
func removesOf(p *wiretest.Peer, id string) int {
	n := 0
	for _, m := range p.Messages() {
		if m.Type != "worldChange" {
			continue
		}
		var wc struct {
			Changes []struct{ Type, ID string } `json:"changes"`
		}
		json.Unmarshal(m.Data, &wc)
		for _, c := range wc.Changes {
			if c.Type == "remove" && c.ID == id {
				n++
			}
		}
	}
	return n
}

// A proxy whose upstream connection keeps breaking and coming back does not
// make its clients' objects vanish and reappear for everyone else; once it
// stays away past the reclaim grace, they go.
func TestFlappingProxyDoesNotFlicker(t *testing.T) {
	s, urlS := startNode(t, relay.Options{ReclaimGrace: 2 * time.Second})
	wire := newCutter(t, strings.TrimSuffix(strings.TrimPrefix(urlS, "ws://"), "/ws"))
	p, urlP := startProxy(t, wire.url(), relay.Options{Identifier: p1ID})
	c := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})
	watcher := wiretest.Dial(t, urlS, c0ID, wiretest.Options{})
	c.Change(wiretest.Add("mine", c1ID, props{"n": 0}))
	watcher.WaitProp("mine", "n", "0")

	c.Change(wiretest.Add("short-lived", c1ID, props{}))
	watcher.WaitHas("short-lived")
	// The proxy holds the resume tokens of its identifiers (a peer that
	// drops before it has them waits out the grace like a 2016 peer).
	waitFor(t, "the proxy's resume tokens", 5*time.Second, func() bool {
		return p.HasResumeToken(p1ID) && p.HasResumeToken(c1ID)
	})
	for i := 1; i <= 4; i++ {
		before := upstreamLinkID(p)
		wire.cut()
		// (Its old link gone: it may be back on a new one before a look
		// finds it without any.)
		waitFor(t, "the proxy to notice", 5*time.Second, func() bool { return upstreamLinkID(p) != before })
		if i == 2 {
			// Removed while the proxy is cut off: the server learns it from
			// the proxy's refresh answer after the reconnect.
			c.Change(wiretest.Remove("short-lived", c1ID))
		}
		waitFor(t, "the proxy to reconnect", 5*time.Second, func() bool { return upstreamConnected(p) && sameSet(chainOf(s, p1ID), p1ID, c1ID) })
		c.Change(wiretest.Update("mine", c1ID, props{"n": i}))
		watcher.WaitProp("mine", "n", fmt.Sprint(i))
	}
	watcher.WaitGone("short-lived")
	if n := removesOf(watcher, "mine"); n != 0 {
		t.Fatalf("the watcher was told %d times that the proxy's client's object was removed", n)
	}

	// Now the proxy stays away.
	wire.ln.Close()
	wire.cut()
	watcher.Wait("the object gone after the grace", 10*time.Second, func(m map[string]wiretest.Object) bool { _, ok := m["mine"]; return !ok })
	watcher.CheckClean()
	c.CheckClean()
}

// TestProxyReconnectsWithoutAClientsToken: a proxy whose upstream link
// breaks before it received the resume token of a client that just joined
// it takes that client back with its own identifier: the client stays
// connected, and its object is never removed for the server's clients.
func TestProxyReconnectsWithoutAClientsToken(t *testing.T) {
	s, urlS := startNode(t, relay.Options{ReclaimGrace: 5 * time.Second})
	wire := newCutter(t, strings.TrimSuffix(strings.TrimPrefix(urlS, "ws://"), "/ws"))
	p, urlP := startProxy(t, wire.url(), relay.Options{Identifier: p1ID})
	c1 := wiretest.Dial(t, urlP, c1ID, wiretest.Options{})
	c2 := wiretest.Dial(t, urlP, c2ID, wiretest.Options{})
	watcher := wiretest.Dial(t, urlS, c0ID, wiretest.Options{})
	c1.Change(wiretest.Add("one", c1ID, props{"n": 0}))
	c2.Change(wiretest.Add("two", c2ID, props{"n": 0}))
	watcher.WaitProp("two", "n", "0")
	waitFor(t, "the proxy's resume tokens", 5*time.Second, func() bool {
		return p.HasResumeToken(p1ID) && p.HasResumeToken(c2ID)
	})
	p.ForgetResumeToken(c2ID) // as if c2 had joined just before the break
	before := upstreamLinkID(p)
	wire.cut()
	waitFor(t, "the proxy to notice", 5*time.Second, func() bool { return upstreamLinkID(p) != before })
	waitFor(t, "the proxy back, with its clients", 5*time.Second, func() bool {
		return upstreamConnected(p) && sameSet(chainOf(s, p1ID), p1ID, c1ID, c2ID)
	})
	c2.Change(wiretest.Update("two", c2ID, props{"n": 1}))
	watcher.WaitProp("two", "n", "1")
	if err := c2.Closed(); err != nil {
		t.Fatalf("the client without a token was closed: %v", err)
	}
	if n := removesOf(watcher, "two"); n != 0 {
		t.Fatalf("the watcher was told %d times that the client's object was removed", n)
	}
	watcher.CheckClean()
}
