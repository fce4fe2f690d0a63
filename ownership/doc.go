// Package ownership holds the Solipsism synchronisation rules as pure
// functions: which change records a node sends over a link, which records
// it accepts from a link, which transfers of ownership a link may claim
// (MayClaim) and which objects may change owner at all (Policy).
//
// A node has a Role (client, proxy or server) and links of three kinds:
// Downstream links lead to worlds behind this node (a server's or a proxy's
// clients), the Upstream link leads toward the server (a client's or a
// proxy's one connection), and Mesh links join server nodes to each other.
//
// The rules need two facts about an object's owner: whether the owner is in
// the identifierChain the link's peer advertised, and whether the owner is
// local — this node itself or a world behind one of its downstream links.
// The package does no I/O and keeps no state.
package ownership
