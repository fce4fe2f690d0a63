package membership_test

import (
	"testing"
	"time"

	"github.com/solipsism/mesh/membership"
)

// events records what a Membership tells; in MemberDown, also whether
// its Membership (self, once set) still says the member is alive.
type events struct {
	up, down chan membership.Member
	self     **membership.Membership
	aliveAt  chan bool
}

func newEvents() events {
	return events{up: make(chan membership.Member, 16), down: make(chan membership.Member, 16),
		self: new(*membership.Membership), aliveAt: make(chan bool, 16)}
}
func (e events) MemberUp(m membership.Member) { e.up <- m }
func (e events) MemberDown(m membership.Member) {
	if ms := *e.self; ms != nil {
		e.aliveAt <- ms.Alive(m.Name)
	}
	e.down <- m
}

func start(t *testing.T, id string, ev events, join ...string) *membership.Membership {
	t.Helper()
	m, err := membership.Start(membership.Options{BindAddr: "127.0.0.1:0", ID: id, URL: "ws://127.0.0.1:1/" + id,
		Join: join, Profile: "local", ProbeInterval: 200 * time.Millisecond, SecretKey: []byte("0123456789abcdef"), Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	return m
}

func next(t *testing.T, ch chan membership.Member, what string) membership.Member {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s in 20 s", what)
		return membership.Member{}
	}
}

// Two real memberlist members on loopback: each is told of the other
// with its identifier and URL; one that leaves on purpose is told gone
// as leaving, one that dies as not.
func TestMembersComeAndGo(t *testing.T) {
	evA, evB, evC := newEvents(), newEvents(), newEvents()
	a := start(t, "server-a", evA)
	*evA.self = a
	b := start(t, "server-b", evB, a.Addr())
	if got := next(t, evA.up, "b up at a"); got.ID != "server-b" || got.URL != "ws://127.0.0.1:1/server-b" || got.Name != b.Name() {
		t.Errorf("a is told %+v", got)
	}
	if got := next(t, evB.up, "a up at b"); got.ID != "server-a" || got.Name != a.Name() {
		t.Errorf("b is told %+v", got)
	}
	if joined, err := b.Joined(); !joined || err != nil {
		t.Errorf("b joined %v, %v", joined, err)
	}
	if !a.Alive(b.Name()) || len(a.Members()) != 1 {
		t.Errorf("a's members: %+v", a.Members())
	}

	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	if got := next(t, evA.down, "b down at a"); got.Name != b.Name() || !got.Leaving {
		t.Errorf("b's leave is told as %+v, want leaving", got)
	}
	// While a handles b's going, b is still a member at a: what b's
	// links do meanwhile is not taken for a member already handled.
	if alive := <-evA.aliveAt; !alive {
		t.Error("a said b was gone before its MemberDown returned")
	}
	if !b.Stopped() || a.Alive(b.Name()) {
		t.Errorf("after the leave: b stopped %v, alive at a %v", b.Stopped(), a.Alive(b.Name()))
	}

	c := start(t, "server-c", evC, a.Addr())
	next(t, evA.up, "c up at a")
	c.Kill()
	if got := next(t, evA.down, "c down at a"); got.Name != c.Name() || got.Leaving {
		t.Errorf("c's death is told as %+v, want not leaving", got)
	}
}

func TestAuth(t *testing.T) {
	a := start(t, "server-a", newEvents())
	open, err := membership.Start(membership.Options{BindAddr: "127.0.0.1:0", ID: "server-o", URL: "ws://127.0.0.1:1/o", Events: newEvents()})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Kill()
	for _, tc := range []struct {
		name       string
		m          *membership.Membership
		member     string
		credential string
		want       bool
	}{
		{"its own credential", a, "x", a.Auth("x"), true},
		{"another member's", a, "y", a.Auth("x"), false},
		{"none", a, "x", "", false},
		{"without a secret, anything", open, "x", "", true},
	} {
		if got := tc.m.Verify(tc.member, tc.credential); got != tc.want {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := membership.Start(membership.Options{BindAddr: "127.0.0.1:0", ID: "x", URL: "ws://x", Profile: "moon", Events: newEvents()}); err == nil {
		t.Error("an unknown profile was taken")
	}
}
