package peer

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Ephemeral messages, our extension: chat lines, sound cues, "player
// fired", requests to a bot — what an app sends that is not state. A peer
// sends ["message",{"type":…,"data":…}] with at most one target, "room"
// or "world" (neither: everyone), and optionally "at", a position: only
// peers whose interest region holds it receive it. Nodes stamp "from"
// with the sending world and relay it like a change of an object that
// world owns, only to peers that list FeatureMessages, in the order the
// sender sent them, after the changes it made before. A message is never
// stored: who is not connected misses it.

// TypeMessage is the message type of an ephemeral message.
const TypeMessage = "message"

// FeatureMessages is the feature of peers that take ephemeral messages.
const FeatureMessages = "messages"

// MaxMessageTypeBytes bounds a message's type.
const MaxMessageTypeBytes = 64

// DefaultMaxQueuedMessageBytes is how many bytes of ephemeral messages a
// link holds for a peer that reads slower than they come; beyond, new
// ones are dropped for that peer (and counted), its state unaffected.
const DefaultMaxQueuedMessageBytes = 1 << 20

// AppMessage is the data of a message.
type AppMessage struct {
	// From is the world that sent the message, stamped by the first node
	// it reaches; a peer may set it only to a world of its
	// identifierChain.
	From string
	// Type is the app's name for the kind of message: 1 to
	// MaxMessageTypeBytes bytes.
	Type string
	// Data is any JSON value; nil means null.
	Data json.RawMessage
	// Room, if set, sends the message to the peers in that room; World, if
	// set, to that world alone. At most one of them is set; neither means
	// everyone.
	Room, World string
	// At, if HasAt, is where the message happens: peers with an interest
	// region receive it only if the region holds it.
	At    [3]float64
	HasAt bool
}

// AppMessageHandler is implemented by a Handler that takes ephemeral
// messages; HandleAppMessage is called like the others, one at a time in
// message order.
type AppMessageHandler interface {
	HandleAppMessage(l *Link, m AppMessage)
}

type wireAppMessage struct {
	From  *string         `json:"from"`
	Type  *string         `json:"type"`
	Data  json.RawMessage `json:"data"`
	Room  *string         `json:"room"`
	World *string         `json:"world"`
	At    json.RawMessage `json:"at"`
}

// DecodeAppMessage decodes the data of a message.
func (l Limits) DecodeAppMessage(data json.RawMessage) (AppMessage, error) {
	l = l.withDefaults()
	var w wireAppMessage
	if err := json.Unmarshal(data, &w); err != nil || isNull(data) {
		return AppMessage{}, invalid("message is not an object")
	}
	var m AppMessage
	if w.Type == nil {
		return m, invalid("message has no type")
	}
	m.Type = *w.Type
	if m.Type == "" || len(m.Type) > MaxMessageTypeBytes || !utf8.ValidString(m.Type) {
		return m, invalid("message type must be 1 to %d bytes of UTF-8", MaxMessageTypeBytes)
	}
	for _, f := range []struct {
		name string
		src  *string
		dst  *string
	}{{"message from", w.From, &m.From}, {"message room", w.Room, &m.Room}, {"message world", w.World, &m.World}} {
		if f.src == nil {
			continue
		}
		if err := l.checkID(f.name, *f.src); err != nil {
			return m, err
		}
		*f.dst = *f.src
	}
	if m.Room != "" && m.World != "" {
		return m, invalid("message has both a room and a world")
	}
	if len(w.Data) > 0 && !isNull(w.Data) {
		if depth(w.Data) > l.MaxDepth {
			return m, invalid("message data nests deeper than %d", l.MaxDepth)
		}
		if !utf8.Valid(w.Data) {
			return m, invalid("message data is not valid UTF-8")
		}
		m.Data = w.Data
	}
	if len(w.At) > 0 && !isNull(w.At) {
		var at []float64
		if json.Unmarshal(w.At, &at) != nil || len(at) != 3 {
			return m, invalid("message at is not [x,y,z]")
		}
		for i, v := range at {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return m, invalid("message at is not finite")
			}
			m.At[i] = v
		}
		m.HasAt = true
	}
	return m, nil
}

// AppendAppMessage appends a complete message.
func AppendAppMessage(dst []byte, m AppMessage) []byte {
	dst = append(dst, `["message",{`...)
	if m.From != "" {
		dst = appendString(append(dst, `"from":`...), m.From)
		dst = append(dst, ',')
	}
	dst = appendString(append(dst, `"type":`...), m.Type)
	dst = append(dst, `,"data":`...)
	if len(m.Data) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, m.Data...)
	}
	switch {
	case m.Room != "":
		dst = appendString(append(dst, `,"room":`...), m.Room)
	case m.World != "":
		dst = appendString(append(dst, `,"world":`...), m.World)
	}
	if m.HasAt {
		dst = append(dst, `,"at":[`...)
		for i, v := range m.At {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}]"...)
}

// SendAppMessage queues an encoded message (AppendAppMessage) for the
// peer, after every record offered so far. It reports false, and drops
// the message, if the peer already has MaxQueuedMessageBytes of messages
// waiting: a reader too slow for the messages loses some, never its
// link or its state.
func (l *Link) SendAppMessage(msg []byte) bool {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.closed {
		return false
	}
	if l.msgQueued+len(msg) > l.opts.MaxQueuedMessageBytes {
		l.stats.MessagesDropped.Add(1)
		return false
	}
	it := l.barrierLocked()
	if it == nil {
		return false
	}
	if len(it.msgs) == 0 && it.flags == 0 {
		it.appOnly = true
	}
	l.msgQueued += len(msg)
	it.msgs = append(it.msgs, msg)
	l.startWriterLocked()
	return true
}

// sentAppMessage notes that an ephemeral message of n bytes left the
// queue.
func (l *Link) sentAppMessage(n int) {
	l.outMu.Lock()
	l.msgQueued -= n
	l.outMu.Unlock()
}
