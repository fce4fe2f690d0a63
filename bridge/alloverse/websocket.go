package alloverse

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/relay"
)

// HandlerOptions configures Handler. The zero value is usable.
type HandlerOptions struct {
	// ReadLimit is the largest frame a client may send. Zero means
	// DefaultReadLimit.
	ReadLimit int64
	// OriginPatterns lists the browser origins accepted besides the
	// server's own (see websocket.AcceptOptions).
	OriginPatterns []string
	// WriteTimeout closes a client that takes longer to take one frame.
	// Zero means 10 s.
	WriteTimeout time.Duration
}

// DefaultReadLimit is the default HandlerOptions.ReadLimit.
const DefaultReadLimit = 1 << 20

// maxReplies bounds the replies waiting for a slow client; one that falls
// this far behind is closed.
const maxReplies = 256

// Handler serves Alloverse clients over WebSocket, one JSON document per
// text frame, on the bridge b.
func (b *Bridge) Handler(opts HandlerOptions) http.Handler {
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = DefaultReadLimit
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.node.Draining() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "this node is draining: connect to another", http.StatusServiceUnavailable)
			return
		}
		var grant *auth.Grant
		if b.opts.Auth != nil {
			g, err := b.opts.Auth.Authenticate(auth.FromRequest(r))
			if err != nil {
				http.Error(w, "a valid token is required (query parameter token, or Authorization: Bearer)", http.StatusUnauthorized)
				return
			}
			grant = g
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: opts.OriginPatterns})
		if err != nil {
			b.log.Debug("websocket accept failed", "remote", r.RemoteAddr, "err", err)
			return
		}
		c.SetReadLimit(opts.ReadLimit)
		wc := &wsConn{c: c, remote: r.RemoteAddr, wake: make(chan struct{}, 1), done: make(chan struct{}), timeout: opts.WriteTimeout}
		s, err := b.Connect(wc)
		if err != nil {
			c.Close(websocket.StatusGoingAway, "place shutting down")
			return
		}
		s.grant = grant
		go wc.writeLoop()
		wc.readLoop(s)
		s.Close()
		wc.Close(StatusNormal, "")
		<-wc.writerDone()
		wc.mu.Lock()
		werr := wc.writeErr
		wc.mu.Unlock()
		if werr != nil {
			b.log.Info("closed a client that did not take what it was sent", "remote", r.RemoteAddr, "write_timeout", opts.WriteTimeout, "err", werr)
		} else {
			b.log.Debug("client left", "remote", r.RemoteAddr)
		}
	})
}

// wsConn is a Conn over WebSocket: one writer goroutine sends the newest
// state packet and the replies, in order.
type wsConn struct {
	c       *websocket.Conn
	remote  string
	timeout time.Duration

	mu      sync.Mutex
	state   []byte
	replies [][]byte
	closing bool
	code    StatusCode
	reason  string
	wake    chan struct{}
	done    chan struct{}
	// writeErr is why the writer gave up (a client that did not take a
	// frame within the write timeout), for the log.
	writeErr error
}

// Describe implements Described.
func (w *wsConn) Describe() (kind, remote string) { return relay.PeerAlloverseWebSocket, w.remote }

func (w *wsConn) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// SendState implements Conn: a packet not yet written is replaced.
func (w *wsConn) SendState(pkt []byte) {
	w.mu.Lock()
	w.state = pkt
	w.mu.Unlock()
	w.signal()
}

// Send implements Conn.
func (w *wsConn) Send(frame []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return errors.New("alloverse: connection closing")
	}
	if len(w.replies) >= maxReplies {
		w.closeLocked(StatusPolicy, "too slow to take replies")
		return errors.New("alloverse: client too slow")
	}
	w.replies = append(w.replies, frame)
	w.signal()
	return nil
}

// Close implements Conn.
func (w *wsConn) Close(code StatusCode, reason string) {
	w.mu.Lock()
	w.closeLocked(code, reason)
	w.mu.Unlock()
}

func (w *wsConn) closeLocked(code StatusCode, reason string) {
	if w.closing {
		return
	}
	w.closing, w.code, w.reason = true, code, reason
	w.signal()
}

func (w *wsConn) writerDone() <-chan struct{} { return w.done }

func (w *wsConn) writeLoop() {
	defer close(w.done)
	for range w.wake {
		for {
			w.mu.Lock()
			var frame []byte
			switch {
			case len(w.replies) > 0:
				frame = w.replies[0]
				w.replies[0] = nil
				w.replies = w.replies[1:]
			case w.state != nil:
				frame, w.state = w.state, nil
			}
			closing, code, reason := w.closing, w.code, w.reason
			w.mu.Unlock()
			if frame == nil {
				if closing {
					w.c.Close(websocket.StatusCode(code), reason)
					return
				}
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
			err := w.c.Write(ctx, websocket.MessageText, frame)
			cancel()
			if err != nil {
				w.mu.Lock()
				w.writeErr = err
				w.mu.Unlock()
				w.c.CloseNow()
				return
			}
		}
	}
}

// readLoop hands the client's frames to s until the connection ends.
func (w *wsConn) readLoop(s *Session) {
	for {
		typ, frame, err := w.c.Read(context.Background())
		if err != nil {
			// Over the read limit, coder/websocket has already closed the
			// connection with 1009.
			return
		}
		if typ != websocket.MessageText {
			w.Close(StatusUnsupported, "binary frames are not part of the protocol")
			return
		}
		if err := s.Handle(frame); err != nil {
			reason := err.Error()
			if len(reason) > 120 { // a close frame's payload is limited to 125 bytes
				reason = reason[:120]
			}
			w.Close(StatusInvalid, reason)
			return
		}
	}
}
