package peer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// AcceptOptions configures Accept. The zero value is usable.
type AcceptOptions struct {
	// ReadLimit is the largest message accepted, in bytes; a larger one
	// closes the connection with 1009. Zero means no limit: messages are
	// streamed, and a Link bounds what it holds of one (Limits).
	ReadLimit int64
	// OriginPatterns lists host patterns (path.Match syntax) of browser
	// origins allowed besides the request's own host. Nil allows same-origin
	// and non-browser clients only; "*" allows every origin.
	OriginPatterns []string
}

// Buffer sizes of accepted connections. net/http hands a hijacked
// connection 4 KiB for each direction, which coder/websocket keeps for the
// connection's life: most of what an idle connection costs. Small frames
// fit these; larger payloads bypass a bufio buffer anyway.
const (
	acceptReadBuffer  = 256
	acceptWriteBuffer = 64
)

// smallBuffers hands coder/websocket the hijacked connection with small
// buffers instead of net/http's, writing through a frameWriter.
type smallBuffers struct {
	http.ResponseWriter
	fw *frameWriter
}

func (s *smallBuffers) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, acceptReadBuffer)
	if n := brw.Reader.Buffered(); n > 0 {
		// A client that did not wait for the 101 already sent frames. They
		// go into the new buffer, where coder/websocket looks for them.
		b, _ := brw.Reader.Peek(n)
		br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(b)), c), max(acceptReadBuffer, n))
		if _, err := br.Peek(n); err != nil {
			c.Close()
			return nil, nil, err
		}
	}
	s.fw = &frameWriter{conn: c}
	return c, bufio.NewReadWriter(br, bufio.NewWriterSize(s.fw, acceptWriteBuffer)), nil
}

// frameWriter is what coder/websocket's write buffer flushes into. A frame
// larger than the buffer reaches it in two writes (the header and the start
// of the payload from the buffer, then the rest of the payload directly),
// which would be two system calls per message. Told the size of the data
// frame about to be written (expect), it holds the first part back and
// writes both with one writev. Any write it is not told about (control
// frames) passes straight through, and release flushes whatever it still
// holds, so a wrong count costs a system call, never order or data.
type frameWriter struct {
	conn net.Conn
	mu   sync.Mutex
	want int     // bytes of the announced frame not yet seen
	held *[]byte // the frame's first part, copied: the buffer is reused
	bufs net.Buffers
}

// expect announces a data frame of n bytes, header included.
func (f *frameWriter) expect(n int) {
	f.mu.Lock()
	f.want = n
	f.mu.Unlock()
}

// release writes what is held and forgets the announcement.
func (f *frameWriter) release() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.want = 0
	if f.held == nil {
		return nil
	}
	var err error
	if len(*f.held) > 0 {
		_, err = f.conn.Write(*f.held)
	}
	f.put()
	return err
}

// heldPool holds the buffers of frames being joined: a connection holds one
// only while it writes a large message.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, acceptWriteBuffer); return &b }}

func (f *frameWriter) put() {
	*f.held = (*f.held)[:0]
	heldPool.Put(f.held)
	f.held = nil
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.want <= 0 {
		return f.conn.Write(p)
	}
	f.want -= len(p)
	if f.want > 0 {
		if f.held == nil {
			f.held = heldPool.Get().(*[]byte)
		}
		*f.held = append(*f.held, p...)
		return len(p), nil
	}
	f.want = 0
	if f.held == nil {
		return f.conn.Write(p)
	}
	f.bufs = append(f.bufs[:0], *f.held, p)
	bufs := f.bufs // WriteTo consumes its receiver
	_, err := bufs.WriteTo(f.conn)
	clear(f.bufs)
	f.put()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// frameHeaderLen is the length of an unmasked frame header for a payload
// of n bytes (RFC 6455 section 5.2).
func frameHeaderLen(n int) int {
	switch {
	case n < 126:
		return 2
	case n <= 65535:
		return 4
	}
	return 10
}

// Accept upgrades an HTTP request to a WebSocket Conn. On failure it has
// already written an HTTP error response.
func Accept(w http.ResponseWriter, r *http.Request, opts AcceptOptions) (Conn, error) {
	sb := &smallBuffers{ResponseWriter: w}
	c, err := websocket.Accept(sb, r, &websocket.AcceptOptions{OriginPatterns: opts.OriginPatterns})
	if err != nil {
		return nil, fmt.Errorf("accept websocket from %s: %w", r.RemoteAddr, err)
	}
	ws := newWSConn(c, opts.ReadLimit, r.RemoteAddr)
	ws.fw = sb.fw
	return ws, nil
}

// DialOptions configures Dial. The zero value is usable.
type DialOptions struct {
	// ReadLimit is as in AcceptOptions.
	ReadLimit int64
	// HTTPClient is used for the handshake; nil means http.DefaultClient.
	// Set it to configure TLS for wss:// URLs.
	HTTPClient *http.Client
	// Header is sent with the handshake request.
	Header http.Header
}

// HandshakeError is a refused WebSocket handshake: the server answered with
// an HTTP status other than 101.
type HandshakeError struct {
	URL        string
	StatusCode int
	Err        error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("dial %s: HTTP %d: %v", e.URL, e.StatusCode, e.Err)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// Dial opens a WebSocket Conn to a ws:// or wss:// URL. A handshake the
// server refuses is reported as a *HandshakeError.
func Dial(ctx context.Context, url string, opts DialOptions) (Conn, error) {
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: opts.HTTPClient, HTTPHeader: opts.Header})
	if err != nil {
		if resp != nil && resp.StatusCode != 0 {
			return nil, &HandshakeError{URL: url, StatusCode: resp.StatusCode, Err: err}
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	return newWSConn(c, opts.ReadLimit, url), nil
}

type wsConn struct {
	c      *websocket.Conn
	remote string
	fw     *frameWriter // accepted connections only
}

func newWSConn(c *websocket.Conn, limit int64, remote string) *wsConn {
	if limit <= 0 {
		limit = -1
	}
	c.SetReadLimit(limit)
	return &wsConn{c: c, remote: remote}
}

func (w *wsConn) Reader(ctx context.Context) (io.Reader, error) {
	typ, r, err := w.c.Reader(ctx)
	if err != nil {
		return nil, w.mapErr(err)
	}
	if typ != websocket.MessageText {
		return nil, &DecodeError{Code: StatusUnsupported, Reason: "binary frames are not part of the protocol"}
	}
	return wsReader{r: r, w: w}, nil
}

// mapErr reports a close frame from the peer as a *CloseError.
func (w *wsConn) mapErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return &CloseError{Code: StatusCode(ce.Code), Reason: ce.Reason, Remote: true}
	}
	return err
}

type wsReader struct {
	r io.Reader
	w *wsConn
}

func (r wsReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = r.w.mapErr(err)
	}
	return n, err
}

func (w *wsConn) Write(ctx context.Context, p []byte) error {
	if w.fw == nil || frameHeaderLen(len(p))+len(p) <= acceptWriteBuffer {
		return w.c.Write(ctx, websocket.MessageText, p) // one write anyway
	}
	w.fw.expect(frameHeaderLen(len(p)) + len(p))
	err := w.c.Write(ctx, websocket.MessageText, p)
	if rerr := w.fw.release(); err == nil {
		err = rerr
	}
	return err
}

func (w *wsConn) Close(code StatusCode, reason string) error {
	if len(reason) > 120 { // a close frame's payload is limited to 125 bytes
		reason = reason[:120]
	}
	return w.c.Close(websocket.StatusCode(code), reason)
}

func (w *wsConn) CloseNow() error { return w.c.CloseNow() }

func (w *wsConn) Ping(ctx context.Context) error { return w.c.Ping(ctx) }

func (w *wsConn) RemoteAddr() string { return w.remote }
