package test

import (
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/internal/wiretest"
)

type props = map[string]any

// The binary, started as a process, serves the protocol, health and metrics,
// and exits cleanly on SIGTERM.
func TestServerProcess(t *testing.T) {
	p := startProc(t, "--tick", "20ms", "--read-limit", "64KiB")
	if code, body := httpGet(t, "http://"+p.Addr+"/healthz"); code != 200 || !strings.Contains(body, `"serving"`) {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	a := wiretest.Dial(t, p.URL(), "client-aaaaaaaa-aaaaaaaa", wiretest.Options{})
	b := wiretest.Dial(t, p.URL(), "client-bbbbbbbb-bbbbbbbb", wiretest.Options{})
	time.Sleep(100 * time.Millisecond) // both handshakes
	a.Change(wiretest.Add("ball", a.ID, props{"position": []float64{0, 1, 0}}))
	b.WaitProp("ball", "position", "[0,1,0]")
	a.Change(wiretest.Update("ball", a.ID, props{"position": []float64{0, 2, 0}}))
	b.WaitProp("ball", "position", "[0,2,0]")

	// --read-limit is honoured.
	big := wiretest.Dial(t, p.URL(), "client-cccccccc-cccccccc", wiretest.Options{})
	big.SendRaw([]byte(`["worldChange",{"changes":[{"type":"add","id":"x","owner":"client-cccccccc-cccccccc","properties":{"s":"` + strings.Repeat("x", 70<<10) + `"}}]}]`))
	if code, _ := big.WaitClosed(5 * time.Second); code != websocket.StatusMessageTooBig {
		t.Fatalf("over-limit message closed with %d", code)
	}

	_, metrics := httpGet(t, "http://"+p.Addr+"/metrics")
	for _, want := range []string{
		`solipsism_links{kind="downstream",role="server"} 2`,
		`solipsism_objects{role="server"} 1`,
		`solipsism_messages_total{direction="in",role="server",type="worldChange"}`,
		`solipsism_refused_writes_total`,
		`solipsism_coalesced_records_total`,
		`go_goroutines`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if v := metricValue(metrics, `solipsism_change_records_total{direction="out",role="server"}`); v < 2 {
		t.Errorf("records out = %v, want ≥ 2", v)
	}
	a.Close()
	b.WaitGone("ball")
	p.Stop(t)
	if !strings.Contains(p.Log(), "shutting down") {
		t.Errorf("no shutdown log line:\n%s", p.Log())
	}
	a.CheckClean()
	b.CheckClean()
}

// Flags can be set from the environment, and bad ones are refused with a
// clear message.
func TestProcessConfig(t *testing.T) {
	bin := nodeBinary(t)
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad role", []string{"--role", "king"}, nil, "--role"},
		{"proxy without upstream", []string{"--role", "proxy"}, nil, "--upstream"},
		{"bad read limit", []string{"--read-limit", "lots"}, nil, "--read-limit"},
		{"bad env", nil, []string{"SOLIPSISM_TICK=soon"}, `SOLIPSISM_TICK="soon" (--tick): parse error; want a duration`},
		{"bad log format", []string{"--log-format", "xml"}, nil, "--log-format"},
		{"bad prefix", []string{"--prefix", "my server"}, nil, "prefix-XXXXXXXX-XXXXXXXX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runBinary(bin, tt.args, tt.env)
			if err == nil || !strings.Contains(out, tt.want) {
				t.Fatalf("err = %v, output %q lacks %q", err, out, tt.want)
			}
		})
	}
	// The environment sets what the command line does not.
	p := startProcEnv(t, []string{"SOLIPSISM_PREFIX=envprefix", "SOLIPSISM_LOG_FORMAT=json"})
	if _, body := httpGet(t, "http://"+p.Addr+"/healthz"); !strings.Contains(body, `"envprefix-`) {
		t.Fatalf("SOLIPSISM_PREFIX ignored: %s", body)
	}
}
