package relay

import "github.com/solipsism/mesh/peer"

// wire is the node as its links see it: every link of the node reports
// what its peer sends to the node through wire, which implements
// peer.Handler and the optional handlers (departed, digests, messages).
// Being a type of its own keeps the wire callbacks out of Node's public
// API. Its methods are called as peer.Handler states: from each link's
// reading goroutine, one at a time per link.
type wire Node

var (
	_ peer.Handler           = (*wire)(nil)
	_ peer.DepartedHandler   = (*wire)(nil)
	_ peer.DigestHandler     = (*wire)(nil)
	_ peer.AppMessageHandler = (*wire)(nil)
)

func (w *wire) HandleWorldChange(l *peer.Link, wc peer.WorldChange) {
	(*Node)(w).handleWorldChange(l, wc)
}

func (w *wire) HandleRequestRefresh(l *peer.Link) { (*Node)(w).handleRequestRefresh(l) }

func (w *wire) HandleMetadata(l *peer.Link, md peer.Metadata) { (*Node)(w).handleMetadata(l, md) }

func (w *wire) LocalMetadata(l *peer.Link) peer.Metadata { return (*Node)(w).localMetadata(l) }

func (w *wire) HandleClose(l *peer.Link, err error) { (*Node)(w).handleClose(l, err) }

func (w *wire) HandleDeparted(l *peer.Link, d peer.Departed) { (*Node)(w).handleDeparted(l, d) }

func (w *wire) HandleDigest(l *peer.Link, d peer.Digest) { (*Node)(w).handleDigest(l, d) }

func (w *wire) HandleRepair(l *peer.Link, typ string, r peer.Repair) {
	(*Node)(w).handleRepair(l, typ, r)
}

func (w *wire) HandleAppMessage(l *peer.Link, m peer.AppMessage) { (*Node)(w).handleAppMessage(l, m) }
