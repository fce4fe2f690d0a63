package alloverse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/solipsism/mesh/internal/wiretest"
)

// allonetPeer builds testdata/allonet.c (an Alloverse client that behaves
// as allonet's does, asserts included) against the reference ENet library
// and cJSON, or skips the test saying how to get them (CI installs them).
func allonetPeer(t *testing.T) string {
	t.Helper()
	return wiretest.BuildC(t, "testdata/allonet.c", "libenet-dev libcjson-dev", "enet", "cjson")
}

// allonetRun is one run of the C peer: its output lines, and how it ended.
type allonetRun struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
	err   error
}

func (r *allonetRun) has(prefix string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// endedWell waits for the run's end and fails t if the peer aborted (as
// allonet's asserts would) or ended otherwise than by its time being up.
func (r *allonetRun) endedWell(t *testing.T) {
	t.Helper()
	<-r.done
	if l, ok := r.has("ASSERT"); ok {
		t.Fatalf("allonet would have aborted: %s\n%s", l, r.output())
	}
	var ee *exec.ExitError
	if r.err != nil && !errors.As(r.err, &ee) || ee != nil {
		t.Fatalf("the peer ended with %v:\n%s", r.err, r.output())
	}
}

func (r *allonetRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// startAllonet runs the C peer against addr for the given time, with env
// added to its environment.
func startAllonet(t *testing.T, bin, addr string, version int, d time.Duration, env ...string) *allonetRun {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	cmd := exec.CommandContext(ctx, bin, host, port, fmt.Sprint(version), fmt.Sprintf("%.1f", d.Seconds()))
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &allonetRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer cancel()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
			r.mu.Unlock()
		}
		r.err = cmd.Wait()
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// everyHeartbeat calls fn(1), fn(2), … every 10 ms (the tests'
// heartbeat) until 1.5 s before the peer's run of d ends, or it ends;
// wait on what it returns.
func everyHeartbeat(run *allonetRun, d time.Duration, fn func(n int)) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		quiet := time.Now().Add(d - 1500*time.Millisecond)
		for n := 1; time.Now().Before(quiet); n++ {
			select {
			case <-run.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			fn(n)
		}
	}()
	return &wg
}

// TestAllonetGenerations: clients of both allonet generations (3, with
// its five channels; 4 as built from allonet's 4.0 tag, version 4 in that
// layout; 4 since, with six channels) connect over ENet, directly and
// through a lossy link, while every core is busy and a Solipsism client
// changes the world on every heartbeat, which is 10 ms: each announces,
// is answered, syncs its clock, spawns an entity the Solipsism client
// sees, follows the world through sets and merges without ever being sent
// a state it already holds (the peer aborts as allonet's asserts do), and
// ends with the place's entities.
func TestAllonetGenerations(t *testing.T) {
	bin := allonetPeer(t)
	for _, tc := range []struct {
		name    string
		version int
		env     []string
		loss    bool
	}{
		{name: "3", version: 3},
		{name: "4.0-tag", version: 4, env: []string{"ALLONET_TAG_4_0=1"}},
		{name: "4", version: 4},
		{name: "3-lossy", version: 3, loss: true},
		{name: "4-lossy", version: 4, loss: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPlace(t, Options{Heartbeat: 10 * time.Millisecond})
			addr := startENet(t, p)
			if tc.loss {
				addr = wiretest.LossyUDP(t, addr, uint64(tc.version))
			}
			alice := p.solipsist(t, "alice")
			var ids []string
			for i := range 5 {
				id, _ := alice.Create(map[string]any{"n": 0, "i": i})
				ids = append(ids, id)
			}
			stop := wiretest.BusyCores()
			defer stop()
			// (Through loss, time for a few of its 1 Hz clock requests to
			// get through.)
			d := 4 * time.Second
			if tc.loss {
				d = 7 * time.Second
			}
			run := startAllonet(t, bin, addr, tc.version, d, tc.env...)
			// The peer's entity, seen while it is there (it goes with
			// the peer).
			var spawned sync.WaitGroup
			spawned.Add(1)
			go func() {
				defer spawned.Done()
				for {
					for _, o := range alice.World().Objects() {
						if string(o.Properties.Value("made_by")) == `"allonet.c"` {
							return
						}
					}
					select {
					case <-run.done:
						t.Error("alice never saw the peer's entity")
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			// Changes on every heartbeat, and an entity now and then
			// that comes and goes.
			var extra string
			changes := everyHeartbeat(run, d, func(n int) {
				alice.Set(ids[n%len(ids)], map[string]any{"n": n})
				if n%25 == 0 {
					if extra != "" {
						alice.Remove(extra)
					}
					extra, _ = alice.Create(map[string]any{"n": n, "extra": true})
				}
			})
			run.endedWell(t)
			changes.Wait()
			for _, want := range []string{"connected", `response ["announce","`, `response ["spawn_entity","`, "clock", "state "} {
				if _, ok := run.has(want); !ok {
					t.Fatalf("no %q from the peer:\n%s", want, run.output())
				}
			}
			if l, _ := run.has(`response ["announce","`); strings.Contains(l, `"error"`) {
				t.Fatalf("announce refused: %s", l)
			}
			spawned.Wait()
			// The changes stopped well before the peer left: its last
			// state holds alice's world as it is (the peer's own entities
			// went with it).
			final, _ := run.has("final ")
			var ents map[string]struct {
				Components map[string]json.RawMessage `json:"components"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(final, "final ")), &ents); err != nil {
				t.Fatalf("the peer's final state: %v: %s", err, final)
			}
			want := map[string]string{}
			for _, o := range alice.World().Objects() {
				if o.Owner == alice.Identifier() {
					want[o.ID] = string(o.Properties.Value("n"))
				}
			}
			got := map[string]string{}
			for id, e := range ents {
				if _, mine := want[id]; mine || e.Components["extra"] != nil {
					got[id] = string(e.Components["n"])
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the peer ended with %v, alice's world is %v", got, want)
			}
		})
	}
}

// TestAllonetOutdatedVersion: a client announcing a version the place
// does not speak gets allonet's own refusal (alloerror_outdated_version,
// 1003, and its message), then an ENet disconnect with that code.
func TestAllonetOutdatedVersion(t *testing.T) {
	bin := allonetPeer(t)
	p := startPlace(t, Options{})
	addr := startENet(t, p)
	for _, v := range []int{2, 5} {
		run := startAllonet(t, bin, addr, v, 10*time.Second)
		<-run.done
		want := []string{`response ["announce","error",1003,"Please update your app. Outdated network protocol."]`, "disconnected 1003"}
		for _, w := range want {
			if _, ok := run.has(w); !ok {
				t.Fatalf("version %d: no %q:\n%s", v, w, run.output())
			}
		}
	}
}

// TestAllonetViews: on a bridge with a view radius of 10, an allonet
// client (version 4, directly and through a lossy link, every core busy)
// whose avatar stands at x = 0 follows a world where a Solipsism client
// moves objects in and out of its view on every heartbeat, and creates
// and removes others near and far: it is never sent a state it already
// holds (the peer aborts as allonet's asserts do), and its last state
// holds exactly the objects in its view (and nothing of those out of it).
func TestAllonetViews(t *testing.T) {
	bin := allonetPeer(t)
	for _, loss := range []bool{false, true} {
		t.Run(fmt.Sprint("lossy ", loss), func(t *testing.T) {
			p := startPlace(t, Options{Heartbeat: 10 * time.Millisecond, ViewRadius: 10})
			addr := startENet(t, p)
			if loss {
				addr = wiretest.LossyUDP(t, addr, 7)
			}
			alice := p.solipsist(t, "alice")
			at := func(x float64) map[string]any { return map[string]any{"position": []float64{x, 0, 0}} }
			var ids []string
			for i := range 8 {
				id, _ := alice.Create(at(float64(i * 5)))
				ids = append(ids, id)
			}
			stop := wiretest.BusyCores()
			defer stop()
			d := 4 * time.Second
			if loss {
				d = 6 * time.Second
			}
			run := startAllonet(t, bin, addr, 4, d, "ALLONET_AVATAR_X=0")
			var extra string
			changes := everyHeartbeat(run, d, func(n int) {
				// In and out: 0 to 35, one object a heartbeat.
				i := n % len(ids)
				alice.Set(ids[i], map[string]any{"position": []float64{float64((n/len(ids)+i)%8) * 5, 0, 0}, "n": n})
				if n%15 == 0 {
					if extra != "" {
						alice.Remove(extra)
					}
					props := at(float64(n % 40))
					props["extra"] = true
					extra, _ = alice.Create(props)
				}
			})
			run.endedWell(t)
			changes.Wait()
			final, _ := run.has("final ")
			var ents map[string]struct {
				Components map[string]json.RawMessage `json:"components"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(final, "final ")), &ents); err != nil {
				t.Fatalf("the peer's final state: %v: %s\n%s", err, final, run.output())
			}
			// Every object ends at a multiple of 5 (none in the margin
			// past 10): those within 10 of the avatar are in view.
			want, got := map[string]string{}, map[string]string{}
			for _, o := range alice.World().Objects() {
				var pos []float64
				json.Unmarshal(o.Properties.Value("position"), &pos)
				if o.Owner == alice.Identifier() && len(pos) == 3 && pos[0] <= 10 {
					want[o.ID] = string(o.Properties.Value("n"))
				}
			}
			for id, e := range ents {
				if e.Components["position"] != nil && e.Components["geometry"] == nil {
					got[id] = string(e.Components["n"])
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the peer ended with %v; in its view: %v", got, want)
			}
		})
	}
}
