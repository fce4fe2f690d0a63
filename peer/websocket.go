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
	acceptReadBuffer  = 512
	acceptWriteBuffer = 512
)

// smallBuffers hands coder/websocket the hijacked connection with small
// buffers instead of net/http's.
type smallBuffers struct{ http.ResponseWriter }

func (s smallBuffers) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
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
	return c, bufio.NewReadWriter(br, bufio.NewWriterSize(c, acceptWriteBuffer)), nil
}

// Accept upgrades an HTTP request to a WebSocket Conn. On failure it has
// already written an HTTP error response.
func Accept(w http.ResponseWriter, r *http.Request, opts AcceptOptions) (Conn, error) {
	c, err := websocket.Accept(smallBuffers{w}, r, &websocket.AcceptOptions{OriginPatterns: opts.OriginPatterns})
	if err != nil {
		return nil, fmt.Errorf("accept websocket from %s: %w", r.RemoteAddr, err)
	}
	return newWSConn(c, opts.ReadLimit, r.RemoteAddr), nil
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
	return w.c.Write(ctx, websocket.MessageText, p)
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
