package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

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
