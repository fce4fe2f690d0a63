package alloverse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/solipsism/mesh/enet"
	"github.com/solipsism/mesh/relay"
)

// allonet's channels (include/allonet/net.h), in the layout of allonet 4
// after its 4.0 tag: the one of a client that connects with six channels.
const (
	ChannelAudio    = 0 // unreliable; not served (ignored)
	ChannelCommands = 1 // reliable: interactions, one JSON document per packet
	ChannelStates   = 2 // unreliable: state packets out, intents in
	ChannelAssets   = 3 // reliable; not served (ignored)
	ChannelVideo    = 4 // not served (ignored)
	ChannelClock    = 5 // unreliable: {"client_time": T} answered with "server_time" added
	channelCount    = 6
)

// The earlier layout, of allonet 3 and of the 4.0 tag itself: a client
// that connects with five channels.
const (
	ChannelStatesV3   = 0 // unreliable: state packets out, intents in
	ChannelCommandsV3 = 1 // reliable
	ChannelAssetsV3   = 2 // reliable; not served (ignored)
	ChannelMediaV3    = 3 // unreliable; not served (ignored)
	ChannelClockV3    = 4 // unreliable
	channelCountV3    = 5
)

// Layout is where an allonet generation puts each kind of packet.
type Layout struct {
	States, Commands, Clock uint8
	// Channels is how many channels a client of this layout connects with.
	Channels int
}

var (
	// LayoutV4 is the layout of allonet since the commit after its 4.0 tag.
	LayoutV4 = Layout{States: ChannelStates, Commands: ChannelCommands, Clock: ChannelClock, Channels: channelCount}
	// LayoutV3 is the layout of allonet 3 (and of the 4.0 tag).
	LayoutV3 = Layout{States: ChannelStatesV3, Commands: ChannelCommandsV3, Clock: ChannelClockV3, Channels: channelCountV3}
)

// layoutFor returns the layout of a client that connected with the given
// number of channels: allonet connects with exactly its layout's count, so
// the layout is known before the client sends anything (its intents and
// clock requests may precede its announce).
func layoutFor(channels int) Layout {
	if channels < channelCount {
		return LayoutV3
	}
	return LayoutV4
}

// ServeENet serves native Alloverse clients (allonet) on an ENet host
// until the host closes: every peer is a Session, exactly like a
// WebSocket client, except that its state packets are merge patches or
// sets, as allonet reads nothing else. Audio, video and assets are
// ignored.
func (b *Bridge) ServeENet(h *enet.Host) error {
	for {
		p, err := h.Accept(context.Background())
		if err != nil {
			if errors.Is(err, enet.ErrClosed) {
				return nil
			}
			return err
		}
		go b.serveENetPeer(p)
	}
}

// enetConn is a Conn over one ENet peer.
type enetConn struct {
	p  *enet.Peer
	ly Layout
}

// SendState sends a state packet unreliably when it fits one datagram. A
// larger one (a set of a big world) would be lost whole with any of its
// fragments, and under load every copy may be: it goes reliably instead,
// one at a time. While one is on its way the others are dropped (the
// client is sent newer state once it has acknowledged that one), so a
// slow client is never queued more than one set.
func (c enetConn) SendState(pkt []byte) {
	if c.p.Unacknowledged(c.ly.States) > 0 {
		return
	}
	var flags enet.Flags
	if len(pkt) > c.p.MaxUnfragmented() {
		flags = enet.Reliable
	}
	c.p.Send(c.ly.States, pkt, flags) //nolint:errcheck // the next heartbeat sends newer state
}
func (c enetConn) Send(frame []byte) error { return c.p.Send(c.ly.Commands, frame, enet.Reliable) }
func (c enetConn) MergeOnly() bool         { return true }

// Describe implements Described.
func (c enetConn) Describe() (kind, remote string) { return relay.PeerAlloverseENet, c.p.RemoteAddr() }
func (c enetConn) Close(code StatusCode, reason string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		// After what was sent before (a refusal), as allonet's place
		// server disconnects.
		c.p.DisconnectLater(ctx, uint32(code)) //nolint:errcheck // it is going either way
	}()
}

func (b *Bridge) serveENetPeer(p *enet.Peer) {
	conn := enetConn{p: p, ly: layoutFor(p.Channels())}
	s, err := b.Connect(conn)
	if err != nil {
		conn.Close(StatusGoingAway, "place shutting down")
		return
	}
	defer s.Close()
	start := time.Now()
	for {
		pk, err := p.Receive(context.Background())
		if err != nil {
			b.log.Debug("ENet client left", "remote", p.RemoteAddr(), "err", err)
			return
		}
		switch pk.Channel {
		case conn.ly.Commands, conn.ly.States:
			if err := s.Handle(pk.Data); err != nil {
				conn.Close(StatusInvalid, err.Error())
				return
			}
		case conn.ly.Clock:
			if reply := clockReply(pk.Data, time.Since(start).Seconds()); reply != nil {
				p.Send(conn.ly.Clock, reply, 0) //nolint:errcheck // unreliable
			}
		}
	}
}

// clockReply answers allonet's clock sync: the request with
// "server_time" added, or nil for anything else.
func clockReply(req []byte, now float64) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(req, &m) != nil {
		return nil
	}
	var t float64
	if json.Unmarshal(m["client_time"], &t) != nil {
		return nil
	}
	m["server_time"], _ = json.Marshal(now)
	out, _ := json.Marshal(m)
	return out
}

// DialENetClient connects to a place's ENet endpoint (host:port) as allonet
// does: with six channels in LayoutV4, or five in LayoutV3 if
// opts.Version is 3.
func DialENetClient(ctx context.Context, addr string, opts ClientOptions) (*Client, error) {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	ly := LayoutV4
	if opts.Version == 3 {
		ly = LayoutV3
	}
	p, err := enet.Dial(ctx, addr, enet.Options{Channels: ly.Channels})
	if err != nil {
		return nil, fmt.Errorf("alloverse: %w", err)
	}
	return newClient(&enetTransport{p: p, ly: ly, clock: make(chan []byte, 1)}, opts), nil
}

type enetTransport struct {
	p     *enet.Peer
	ly    Layout
	clock chan []byte
}

func (t *enetTransport) read(ctx context.Context) (bool, []byte, error) {
	for {
		pk, err := t.p.Receive(ctx)
		if err != nil {
			return false, nil, err
		}
		switch pk.Channel {
		case t.ly.States:
			return true, pk.Data, nil
		case t.ly.Commands:
			return false, pk.Data, nil
		case t.ly.Clock:
			select {
			case t.clock <- pk.Data:
			default:
			}
		}
	}
}

func (t *enetTransport) writeIntent(_ context.Context, b []byte) error {
	return t.p.Send(t.ly.States, b, 0)
}

func (t *enetTransport) writeRequest(_ context.Context, b []byte) error {
	return t.p.Send(t.ly.Commands, b, enet.Reliable)
}

func (t *enetTransport) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return t.p.Disconnect(ctx, 0)
}

// ClockSync asks the place for its time, as allonet does on the clock
// channel; ENet clients only.
func (c *Client) ClockSync(ctx context.Context) (clientTime, serverTime float64, err error) {
	t, ok := c.t.(*enetTransport)
	if !ok {
		return 0, 0, errors.New("alloverse: the clock channel is ENet's")
	}
	clientTime = float64(time.Now().UnixNano()) / 1e9
	req, _ := json.Marshal(map[string]float64{"client_time": clientTime})
	if err := t.p.Send(t.ly.Clock, req, 0); err != nil {
		return 0, 0, err
	}
	select {
	case b := <-t.clock:
		var m struct {
			Client *float64 `json:"client_time"`
			Server *float64 `json:"server_time"`
		}
		if json.Unmarshal(b, &m) != nil || m.Client == nil || m.Server == nil {
			return 0, 0, fmt.Errorf("alloverse: clock answer %s", b)
		}
		return *m.Client, *m.Server, nil
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}
