package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Identity. A node hands every downstream peer a resume token per
// identifier it granted (metadata key "resumeTokens"). A claim to an
// identifier that another connection holds, live or kept through the
// reclaim grace, is accepted only with that identifier's token; without
// it the claimant is closed with 4004 and the holder is not disturbed. A
// token is an HMAC of the identifier under the node's resume secret, so it
// survives the connection that earned it (and, with a shared
// Options.ResumeSecret, a restart or another mesh node).
//
// A peer's chain is admitted (admitChainLocked: what its token grants and
// no other connection holds) and then claimed (claimChainLocked), each
// time its metadata arrives.

// resumeToken returns the token for id.
func (n *Node) resumeToken(id string) string {
	m := hmac.New(sha256.New, n.hub.resumeSecret)
	m.Write([]byte("solipsism-resume:" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// mayTakeOver reports whether a peer presenting md may claim id, held by
// another connection.
func (n *Node) mayTakeOver(id string, md peer.Metadata) bool {
	tok, ok := md.ResumeTokens[id]
	return ok && hmac.Equal([]byte(tok), []byte(n.resumeToken(id)))
}

// takenClaims returns the identifiers of md's chain that another
// connection holds and md cannot take over. n.mu must be held.
func (n *Node) takenClaims(ls *linkState, md peer.Metadata) []string {
	if ls.kind != ownership.Downstream {
		return nil
	}
	// A peer that takes its own identifier back from its earlier
	// connection (a proxy reconnecting) takes back what that connection
	// held for it: the worlds behind it, some of whose tokens it may not
	// have had yet.
	var earlier *linkState
	if own := n.hub.claims[md.Identifier]; own != nil && own != ls && n.mayTakeOver(md.Identifier, md) {
		earlier = own
	}
	var taken []string
	for _, id := range md.IdentifierChain {
		other := n.hub.claims[id]
		if other == nil || other == ls || other == earlier || other.att != nil || other.kind != ownership.Downstream || n.deps.departing[id] != nil {
			// (A departing world's connection is gone; what is left of
			// it goes before the world is claimed again.)
			continue
		}
		if !n.mayTakeOver(id, md) {
			taken = append(taken, id)
		}
	}
	return taken
}

// sendTokensLocked hands a downstream peer the tokens of the identifiers
// it holds, in a metadata message of ours. n.mu must be held.
// refused lists the worlds of its chain the node does not take from it.
// taken lists those that another connection holds.
func (n *Node) sendTokensLocked(ls *linkState, refused, taken []string) {
	if ls.kind != ownership.Downstream || ls.link == nil || len(ls.chain) == 0 && len(refused) == 0 && len(taken) == 0 {
		return
	}
	md := n.tokenMetadataLocked(ls)
	md.Refused, md.Taken = refused, taken
	// Neither tokens nor refusals depend on the records around them: they
	// need not wait for a burst the link is working through.
	ls.link.SendMetadataPrompt(md)
}

// upstreamRefusedLocked closes the downstream links of worlds the
// upstream refused: refused ones its token does not grant (4005), taken
// ones another of its connections holds (4004). One peer's refusal
// refuses that peer, never its siblings or our link upstream. n.mu must be
// held.
func (n *Node) upstreamRefusedLocked(refused, taken []string) {
	for _, r := range []struct {
		ids    []string
		limit  string
		why    string
		code   peer.StatusCode
		reason string
	}{
		{refused, "upstream_refused", "the upstream does not grant the identifier", peer.StatusUnauthorized, "the upstream does not grant identifier %s"},
		{taken, "identity_taken", "another connection holds the identifier upstream", peer.StatusIdentityTaken, "identifier %s is held by another connection upstream; present its resume token"},
	} {
		for _, id := range r.ids {
			ls := n.hub.claims[id]
			if ls == nil || ls.kind != ownership.Downstream {
				continue
			}
			n.life.metrics.Limited(r.limit)
			if ls.link == nil {
				n.log.Warn(r.why+"; an attached peer's objects stay on this node", "identifier", id)
				continue
			}
			n.log.Info(r.why+"; closing the link that claims it", "identifier", id, "link", ls.link.ID())
			ls.link.Close(r.code, fmt.Sprintf(r.reason, id))
		}
	}
}

// tokenMetadataLocked is the node's metadata for a downstream link, with
// the resume tokens of what the link holds: every metadata message a
// downstream peer gets carries them. n.mu must be held.
func (n *Node) tokenMetadataLocked(ls *linkState) peer.Metadata {
	md := n.localMetadataLocked(ownership.Downstream)
	if len(ls.chain) > 0 {
		md.ResumeTokens = make(map[string]string, len(ls.chain))
		for id := range ls.chain {
			md.ResumeTokens[id] = n.resumeToken(id)
		}
	}
	return md
}

// keepTokensLocked stores the tokens an upstream handed us, to present
// when we reconnect. n.mu must be held.
func (n *Node) keepTokensLocked(md peer.Metadata) {
	if len(md.ResumeTokens) == 0 {
		return
	}
	if n.up.tokens == nil {
		n.up.tokens = map[string]string{}
	}
	for id, tok := range md.ResumeTokens {
		n.up.tokens[id] = tok
	}
}

// admitChainLocked checks the identifiers a downstream or mesh peer
// claims, and returns those it may claim (next), and the worlds behind it
// refused because its token does not grant them or another connection
// holds them; md's chain is narrowed to what is admitted. It closes the
// link and reports false if the peer itself is refused. n.mu must be held.
func (n *Node) admitChainLocked(ls *linkState, md *peer.Metadata) (next map[string]bool, refused, taken []string, ok bool) {
	l := ls.link
	if ls.kind == ownership.Mesh && !gameworld.IsIdentifier(md.Identifier) {
		// Every node's identifier has the form (New refuses others): a
		// member that presents another is not one of ours.
		n.log.Warn("refused a mesh member whose identifier is not a node's", "identifier", md.Identifier, "link", l.ID())
		l.Close(peer.StatusPolicy, "a mesh member's identifier must be of the form prefix-XXXXXXXX-XXXXXXXX")
		return nil, nil, nil, false
	}
	next = make(map[string]bool, len(md.IdentifierChain))
	for _, id := range md.IdentifierChain {
		if id == n.id {
			l.Close(peer.StatusPolicy, "identifierChain claims this node's identifier")
			return nil, nil, nil, false
		}
		next[id] = true
	}
	if ls.kind == ownership.Downstream {
		// The peer's own identifier must be granted. A world behind a peer
		// that speaks refusals (a proxy's client) that its token does not
		// cover is refused alone: not claimed, so its writes are refused,
		// and the peer is told, so that it closes that world's link rather
		// than lose its own.
		kept := md.IdentifierChain[:0:0]
		for _, id := range md.IdentifierChain {
			switch {
			case ls.grant.Allows(id):
				kept = append(kept, id)
			case id == md.Identifier || !md.Has(peer.FeatureRefused):
				// (A peer that would not understand a refusal of one of
				// its worlds, a browser's worker speaking for its page
				// say, is refused whole, as it can tell its user.)
				n.log.Info("refused a claim its token does not grant", "identifier", id, "link", l.ID())
				n.life.metrics.Limited("unauthorized")
				l.Close(peer.StatusUnauthorized, "the token does not grant identifier "+id)
				return nil, nil, nil, false
			default:
				n.log.Info("refused a world behind a peer: its token does not grant it", "identifier", id, "link", l.ID(), "peer", md.Identifier)
				n.life.metrics.Limited("unauthorized")
				refused = append(refused, id)
				delete(next, id)
			}
		}
		md.IdentifierChain = kept
	}
	// An identifier another connection holds (without the token that
	// would take it over) is refused: the peer's own, or any of a peer
	// that does not speak refusals, by closing the link; a world behind a
	// peer that does (a proxy's client) alone, as for tokens above.
	for _, id := range n.takenClaims(ls, *md) {
		if id == md.Identifier || !md.Has(peer.FeatureRefused) {
			n.log.Info("refused a claim to an identifier held by another connection", "identifier", id, "link", l.ID())
			n.life.metrics.Limited("identity_taken")
			l.Close(peer.StatusIdentityTaken, "identifier "+id+" is held by another connection; present its resume token")
			return nil, nil, nil, false
		}
		n.log.Info("refused a world behind a peer: another connection holds it", "identifier", id, "link", l.ID(), "peer", md.Identifier)
		n.life.metrics.Limited("identity_taken")
		taken = append(taken, id)
		delete(next, id)
	}
	if len(taken) > 0 {
		// (A new slice: md's shares its array with the link's copy.)
		md.IdentifierChain = slices.DeleteFunc(slices.Clone(md.IdentifierChain), func(id string) bool { return slices.Contains(taken, id) })
	}
	return next, refused, taken, true
}

// claimChainLocked makes ls's chain next: it claims the identifiers
// gained (taking them over from an older connection, a held claim or a
// mesh member's stale view, but never from a live client of this node or
// an attachment) and releases those gone. It reports whether ls gained
// any, and whether the node's own chain changed. n.mu must be held.
func (n *Node) claimChainLocked(ls *linkState, md peer.Metadata, next map[string]bool) (gained, changed bool) {
	l := ls.link
	var gone, joined []string
	for id := range ls.chain {
		if !next[id] {
			gone = append(gone, id)
		}
	}
	for id := range next {
		if ls.chain[id] {
			continue
		}
		n.settleDepartureLocked(id)
		other := n.hub.claims[id]
		if ls.kind == ownership.Mesh && other != nil && other.kind == ownership.Downstream && !heldLocked(other) && !other.detached || other != nil && other.att != nil {
			// A client connected here speaks for itself; a mesh peer's
			// stale view of it does not override that (one whose link
			// dropped, kept for the reclaim grace, has gone on at that
			// member). Nor does anyone take over an attached peer's
			// identifier: it is live until it detaches.
			continue
		}
		changed = true
		if other != nil && other != ls {
			// The newest claim wins: a reconnecting peer takes over its
			// identifiers (and objects) from a connection not yet timed out,
			// or dropped within the grace period. Its refresh answer then
			// tells which of those objects it no longer has.
			if other.detached && ls.kind == ownership.Downstream {
				if ls.sweep == nil {
					ls.sweep = newSweep()
				}
				ls.sweep.claim(id)
			}
			delete(other.chain, id)
			if heldLocked(other) {
				// Held since a restart (persist.go) or since its member
				// left the mesh (MemberGone).
				n.log.Info("held identifier reclaimed", "identifier", id, "link", l.ID())
			} else {
				if omd, _ := other.link.Metadata(); omd.Identifier == id {
					other.link.Close(peer.StatusReplaced, "identifier claimed by a newer connection")
				}
				n.log.Info("identifier moved to newer link", "identifier", id, "from", other.link.ID(), "to", l.ID())
			}
		}
		n.hub.claims[id] = ls
		ls.chain[id] = true
		gained = true
		joined = append(joined, id)
	}
	if (gained || len(gone) > 0) && n.log.Enabled(n.life.ctx, slog.LevelDebug) {
		n.log.Debug("chain changed", "link", l.ID(), "kind", ls.kind.String(), "gained", firstOf(joined), "gone", firstOf(gone))
	}
	if len(gone) > 0 {
		changed = true
		// The peer node that held them gives their persistent objects to
		// itself; we make the same claim.
		n.releaseClaimsTo(gone, ls, md.Identifier)
		for _, id := range gone {
			delete(ls.chain, id)
		}
	}
	return gained, changed
}
