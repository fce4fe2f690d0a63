// Package interest is the geometry of spatial interest, without I/O: a
// uniform grid of cells (Grid), the cells a region's boxes cover, whether a
// point is inside a region, how far from it in bands of doubling distance
// (Band), positions read from JSON (ParseVec3), and an
// index of objects by cell (Index).
//
// A node (package relay) keeps one Index of its world while some peer has
// announced a region, and registers those regions by the cells they cover,
// so that routing a change visits only the peers interested in the cells
// it leaves and enters, and a region change only the objects of the old and
// new regions. Which peers get what stays the node's; this package only
// answers where things are.
//
// Concurrency: nothing here is safe for concurrent use; the node guards
// its Index with its own lock.
package interest
