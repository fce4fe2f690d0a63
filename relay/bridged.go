package relay

import (
	"sort"
	"sync"
	"time"
)

// Kinds of bridged peers, as bridges name them in TrackPeer: metrics
// show each, at zero while none is connected.
const (
	PeerAlloverseWebSocket = "alloverse-websocket"
	PeerAlloverseENet      = "alloverse-enet"
	PeerSnapshot           = "snapshot"
)

var bridgedKinds = []string{PeerAlloverseWebSocket, PeerAlloverseENet, PeerSnapshot}

// BridgedPeer is a peer a bridge serves (an Alloverse client, a snapshot
// client): the node lists it in its state and counts it in its metrics
// from TrackPeer until Done, whether or not it has joined the world yet.
// Its methods are safe for concurrent use.
type BridgedPeer struct {
	n     *Node
	kind  string
	addr  string
	since time.Time

	mu         sync.Mutex
	identifier string
}

// BridgedInfo describes a bridged peer in State.
type BridgedInfo struct {
	Kind       string    `json:"kind"`
	Remote     string    `json:"remote"`
	Identifier string    `json:"identifier,omitempty"`
	Since      time.Time `json:"since"`
}

// bridgedSet is the node's bridged peers; its own lock, so that bridges
// track peers without taking the node's.
type bridgedSet struct {
	mu    sync.Mutex
	peers map[*BridgedPeer]struct{}
}

// TrackPeer registers a peer a bridge serves, of kind (PeerAlloverseENet,
// say) from remote; call Done when it leaves.
func (n *Node) TrackPeer(kind, remote string) *BridgedPeer {
	p := &BridgedPeer{n: n, kind: kind, addr: remote, since: time.Now()}
	n.hub.bridged.mu.Lock()
	if n.hub.bridged.peers == nil {
		n.hub.bridged.peers = map[*BridgedPeer]struct{}{}
	}
	n.hub.bridged.peers[p] = struct{}{}
	n.hub.bridged.mu.Unlock()
	return p
}

// SetIdentifier records the world identifier the peer joined as.
func (p *BridgedPeer) SetIdentifier(id string) {
	p.mu.Lock()
	p.identifier = id
	p.mu.Unlock()
}

// Done removes the peer. It is safe to call more than once.
func (p *BridgedPeer) Done() {
	p.n.hub.bridged.mu.Lock()
	delete(p.n.hub.bridged.peers, p)
	p.n.hub.bridged.mu.Unlock()
}

// Bridged returns the bridged peers, oldest first.
func (n *Node) Bridged() []BridgedInfo {
	n.hub.bridged.mu.Lock()
	out := make([]BridgedInfo, 0, len(n.hub.bridged.peers))
	for p := range n.hub.bridged.peers {
		p.mu.Lock()
		out = append(out, BridgedInfo{Kind: p.kind, Remote: p.addr, Identifier: p.identifier, Since: p.since})
		p.mu.Unlock()
	}
	n.hub.bridged.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// bridgedCounts counts the bridged peers by kind, every kind present.
func (n *Node) bridgedCounts() map[string]int {
	counts := make(map[string]int, len(bridgedKinds))
	for _, k := range bridgedKinds {
		counts[k] = 0
	}
	n.hub.bridged.mu.Lock()
	for p := range n.hub.bridged.peers {
		counts[p.kind]++
	}
	n.hub.bridged.mu.Unlock()
	return counts
}
