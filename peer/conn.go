package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// StatusCode is a WebSocket close code (RFC 6455 section 7.4).
type StatusCode int

// Close codes used by links.
const (
	StatusNormal         StatusCode = 1000
	StatusGoingAway      StatusCode = 1001
	StatusUnsupported    StatusCode = 1003 // binary frames
	StatusInvalidPayload StatusCode = 1007 // malformed message
	StatusPolicy         StatusCode = 1008
	StatusMessageTooBig  StatusCode = 1009 // over the read limit or too many changes
	StatusInternal       StatusCode = 1011
	// StatusServiceRestart: the node is draining (a restart, an upgrade):
	// connect to another.
	StatusServiceRestart StatusCode = 1012
	// StatusReplaced: a newer connection claimed this link's identifier.
	StatusReplaced StatusCode = 4001
	// StatusStalled: the peer did not read for longer than the stall timeout.
	StatusStalled StatusCode = 4002
	// StatusNoMetadata: the peer never answered requestMetadata.
	StatusNoMetadata StatusCode = 4003
	// StatusIdentityTaken: the peer claimed an identifier another
	// connection holds, without that identifier's resume token.
	StatusIdentityTaken StatusCode = 4004
	// StatusUnauthorized: the peer claimed an identifier its token does
	// not grant.
	StatusUnauthorized StatusCode = 4005
	// StatusMoving: a client leaves for another node (its node is
	// draining): its objects are kept for the reclaim grace, as a broken
	// link's, for it to take them back there.
	StatusMoving StatusCode = 4006
)

// CloseError reports why a link or connection closed.
type CloseError struct {
	Code   StatusCode
	Reason string
	// Remote is true when the peer sent the close, false when we did.
	Remote bool
}

func (e *CloseError) Error() string {
	who := "closed"
	if e.Remote {
		who = "closed by peer"
	}
	return fmt.Sprintf("%s: status %d: %s", who, e.Code, e.Reason)
}

// Conn is a message-oriented connection to a peer, carrying one text message
// per Reader or Write.
//
// Concurrency: Reader (and reading what it returns) is done by one
// goroutine at a time, and Write by one goroutine at a time, possibly
// concurrently with reading. Close may be called at any time, from any
// goroutine, more than once; it unblocks reads and writes.
type Conn interface {
	// Reader returns a reader for the next message, to be read to its end
	// (io.EOF) before Reader is called again: messages are streamed, never
	// buffered whole. A message the transport cannot carry (a binary
	// frame) is reported as a *DecodeError with its close code.
	Reader(ctx context.Context) (io.Reader, error)
	// Write sends one message. The caller may reuse p when Write returns.
	Write(ctx context.Context, p []byte) error
	// Close closes the connection with a code and reason for the peer,
	// waiting (boundedly) for the peer to acknowledge.
	Close(code StatusCode, reason string) error
	// CloseNow closes the connection at once, without telling the peer.
	CloseNow() error
	// RemoteAddr describes the peer for logs.
	RemoteAddr() string
}

// Pinger is implemented by transports that can check the peer is alive.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ReadMessage reads the next message from c whole, for tests and tools;
// links stream messages instead.
func ReadMessage(ctx context.Context, c Conn) ([]byte, error) {
	r, err := c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// Pipe returns two connected in-memory Conns, for tests and for joining
// worlds inside one process. Messages are copied; each direction buffers up
// to 64 messages, after which Write blocks until the other side reads.
func Pipe() (Conn, Conn) {
	ab := make(chan []byte, 64)
	ba := make(chan []byte, 64)
	shared := &pipeShared{done: make(chan struct{})}
	return &pipeConn{in: ba, out: ab, s: shared, name: "pipe:a"}, &pipeConn{in: ab, out: ba, s: shared, name: "pipe:b"}
}

type pipeShared struct {
	once   sync.Once
	done   chan struct{}
	mu     sync.Mutex
	code   StatusCode
	reason string
	closer *pipeConn
}

type pipeConn struct {
	in, out chan []byte
	s       *pipeShared
	name    string
}

var errPipeClosed = errors.New("pipe closed")

func (p *pipeConn) closeErr() error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return &CloseError{Code: p.s.code, Reason: p.s.reason, Remote: p.s.closer != p}
}

func (p *pipeConn) Reader(ctx context.Context) (io.Reader, error) {
	b, err := p.Read(ctx)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// Read returns the next message whole.
func (p *pipeConn) Read(ctx context.Context) ([]byte, error) {
	// Deliver what was written before a close, like a real socket would.
	select {
	case b := <-p.in:
		return b, nil
	default:
	}
	select {
	case b := <-p.in:
		return b, nil
	case <-p.s.done:
		return nil, p.closeErr()
	case <-ctx.Done():
		p.Close(StatusGoingAway, "read cancelled")
		return nil, ctx.Err()
	}
}

func (p *pipeConn) Write(ctx context.Context, b []byte) error {
	cp := append([]byte(nil), b...)
	select {
	case <-p.s.done:
		return fmt.Errorf("write: %w", errPipeClosed)
	default:
	}
	select {
	case p.out <- cp:
		return nil
	case <-p.s.done:
		return fmt.Errorf("write: %w", errPipeClosed)
	case <-ctx.Done():
		p.Close(StatusStalled, "write timed out")
		return ctx.Err()
	}
}

func (p *pipeConn) Close(code StatusCode, reason string) error {
	p.s.once.Do(func() {
		p.s.mu.Lock()
		p.s.code, p.s.reason, p.s.closer = code, reason, p
		p.s.mu.Unlock()
		close(p.s.done)
	})
	return nil
}

func (p *pipeConn) CloseNow() error { return p.Close(StatusGoingAway, "closed") }

func (p *pipeConn) RemoteAddr() string { return p.name }
