package relay

import (
	"time"
)

// LinkInfo is a snapshot of one link, for inspection.
type LinkInfo struct {
	ID     uint64 `json:"id"`
	Kind   string `json:"kind"`
	Remote string `json:"remote"`
	// URL is the dialed URL of upstream and mesh links.
	URL string `json:"url,omitempty"`
	// Identifier and Chain are what the peer advertised.
	Identifier string   `json:"identifier"`
	Chain      []string `json:"identifierChain"`
	Role       string   `json:"role,omitempty"`
	// Dialect is the name used for metadata answers on this link.
	Dialect string `json:"dialect"`
	// Ready links receive changes.
	Ready bool `json:"ready"`
	// Queued is the number of objects with changes waiting to be sent.
	Queued      int       `json:"queued"`
	IntervalMs  float64   `json:"intervalMs"`
	Since       time.Time `json:"since"`
	MessagesIn  uint64    `json:"messagesIn"`
	MessagesOut uint64    `json:"messagesOut"`
	RecordsIn   uint64    `json:"recordsIn"`
	RecordsOut  uint64    `json:"recordsOut"`
	BytesIn     uint64    `json:"bytesIn"`
	BytesOut    uint64    `json:"bytesOut"`
	Refused     uint64    `json:"refused"`
	Ignored     uint64    `json:"ignored"`
}

// Links returns a snapshot of the node's links, in the order they opened.
func (n *Node) Links() []LinkInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]LinkInfo, 0, len(n.order))
	for _, ls := range n.order {
		l := ls.link
		md, _ := l.Metadata()
		s := l.Stats()
		info := LinkInfo{
			ID: l.ID(), Kind: ls.kind.String(), Remote: l.RemoteAddr(), URL: ls.remoteURL,
			Identifier: md.Identifier, Chain: md.IdentifierChain, Role: md.Role,
			Dialect: l.Dialect(), Ready: ls.ready, Queued: l.Queue().Len(),
			IntervalMs: float64(l.Interval()) / float64(time.Millisecond), Since: l.Started(),
			RecordsIn: s.RecordsIn.Load(), RecordsOut: s.RecordsOut.Load(),
			BytesIn: s.BytesIn.Load(), BytesOut: s.BytesOut.Load(),
			Refused: s.Refused.Load(), Ignored: s.Ignored.Load(),
		}
		for k := range s.MessagesIn {
			info.MessagesIn += s.MessagesIn[k].Load()
			info.MessagesOut += s.MessagesOut[k].Load()
		}
		if info.Chain == nil {
			info.Chain = []string{}
		}
		out = append(out, info)
	}
	return out
}
