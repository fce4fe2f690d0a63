package alloverse

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestClientTakesTheNewest: a place sends states faster than the client
// takes them (here, 100 sets of 100 KiB back to back, then it
// closes). The client passes over the ones a newer state overtook, ends
// holding the last, counts every state as taken or skipped, acknowledges
// only what it took, and sees the connection end.
func TestClientTakesTheNewest(t *testing.T) {
	const states = 100
	acks := make(chan string, states)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx := r.Context()
		go func() {
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				acks <- string(b)
			}
		}()
		filler := strings.Repeat("x", 100<<10)
		for rev := 1; rev <= states; rev++ {
			msg := fmt.Sprintf(`{"revision":%d,"patch_style":"set","entities":{"e":{"id":"e","components":{"n":%d,"pad":%q}}}}`, rev, rev, filler)
			if c.Write(ctx, websocket.MessageText, []byte(msg)) != nil {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
		c.Close(websocket.StatusNormalClosure, "done")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialClient(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client did not see the connection end")
	}
	// The last state may still be being taken when the connection ends.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, rev, _ := c.Document()
		if rev == states || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, rev, ok := c.Document()
	st := c.Stats()
	if !ok || rev != states {
		t.Fatalf("the client holds revision %d (ok %v), want %d", rev, ok, states)
	}
	if st.Sets+st.Skipped != states || st.Failed != 0 {
		t.Errorf("stats %+v: want %d sets and skipped in all, none failed", st, states)
	}
	if n := uint64(len(acks)); n > st.Sets {
		t.Errorf("%d acknowledgements for %d states taken", n, st.Sets)
	}
	t.Logf("%d states taken, %d skipped", st.Sets, st.Skipped)
	c.Close()
}
