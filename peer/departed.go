package peer

import (
	"encoding/json"
)

// Departures told downstream, our extension, sent only to peers that list
// FeatureDeparted (our proxies). When worlds leave a node with more
// objects than it removes at once, it sends each such downstream peer
// ["departed",{"worlds":[…],"heir":"…"}] where the removes would have
// begun, and then not the removes: the peer takes the worlds' objects out
// of its world itself, as a mesh member does when a world leaves the
// identifierChain a node announces it. Persistent objects are not removed
// but go to the heir, as they do at the sender. A record of one of those
// worlds that arrives after the message is a world come back: the peer
// finishes the departure at once first.

// TypeDeparted is the message type of a departure told downstream.
const TypeDeparted = "departed"

// FeatureDeparted is the feature of peers that take departed messages.
const FeatureDeparted = "departed"

// MaxDepartedWorlds bounds the worlds of one departed message; a sender
// with more sends several.
const MaxDepartedWorlds = 256

// Departed is the data of a departed message.
type Departed struct {
	// Worlds are the identifiers of the worlds that left.
	Worlds []string
	// Heir is the world their persistent objects now belong to.
	Heir string
}

// DepartedHandler is implemented by a Handler that takes departed
// messages; HandleDeparted is called like the others, one at a time in
// message order.
type DepartedHandler interface {
	HandleDeparted(l *Link, d Departed)
}

type wireDeparted struct {
	Worlds []string `json:"worlds"`
	Heir   string   `json:"heir"`
}

// DecodeDeparted decodes the data of a departed message: 1 to
// MaxDepartedWorlds distinct identifiers, and an heir.
func (l Limits) DecodeDeparted(data json.RawMessage) (Departed, error) {
	l = l.withDefaults()
	var w wireDeparted
	if err := json.Unmarshal(data, &w); err != nil {
		return Departed{}, invalid("departed: %v", err)
	}
	if len(w.Worlds) == 0 || len(w.Worlds) > MaxDepartedWorlds {
		return Departed{}, invalid("departed: want 1 to %d worlds", MaxDepartedWorlds)
	}
	seen := make(map[string]bool, len(w.Worlds))
	for _, id := range w.Worlds {
		if err := l.checkID("departed world", id); err != nil {
			return Departed{}, err
		}
		if seen[id] {
			return Departed{}, invalid("departed: world %q listed twice", id)
		}
		seen[id] = true
	}
	if err := l.checkID("departed heir", w.Heir); err != nil {
		return Departed{}, err
	}
	return Departed{Worlds: w.Worlds, Heir: w.Heir}, nil
}

// AppendDeparted appends a complete departed message.
func AppendDeparted(dst []byte, d Departed) []byte {
	dst = appendStrings(append(dst, `["departed",{"worlds":`...), d.Worlds)
	dst = appendString(append(dst, `,"heir":`...), d.Heir)
	return append(dst, "}]"...)
}

// SendDeparted sends the peer departed messages for d (several if d has
// more than MaxDepartedWorlds worlds), after every record offered so far
// and before every record offered later.
func (l *Link) SendDeparted(d Departed) {
	for len(d.Worlds) > 0 {
		n := min(len(d.Worlds), MaxDepartedWorlds)
		l.controlMessage(AppendDeparted(nil, Departed{Worlds: d.Worlds[:n], Heir: d.Heir}))
		d.Worlds = d.Worlds[n:]
	}
}
