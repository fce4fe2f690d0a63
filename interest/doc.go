// Package interest is the geometry of spatial interest, without I/O: a
// uniform grid of cells (Grid), the cells a region's boxes cover, whether a
// point is inside a region, how far from it in bands of doubling distance
// (Band), which of many points each of many viewers takes by their
// distance, as a node's bands publish them (Shells, BandShell), positions
// read from JSON (ParseVec3), and an
// index of objects by cell (Index); what a viewer wants (Wants: boxes and
// rooms, read from its metadata) and whether it is sent a change (Region's
// Verdict, with hysteresis), objects' positions and rooms read from their
// properties (Props); a tick's changes by column, to find what is near a
// viewer among few (Columns); and a cover of more regions than one
// metadata may name, in few rectangles (Coarsen).
//
// A node (package relay) keeps one Space of its world while some peer has
// announced a region: the Index of its objects, and the viewers' regions by
// the cells they cover and the rooms they are in, so that routing a change
// visits only the peers interested in the cells it leaves and enters (or
// its rooms), and a region change only the objects of the old and new
// regions. Which peers get what stays the node's; this package only
// answers where things are and who may see them.
//
// Concurrency: nothing here is safe for concurrent use while it changes;
// the node guards its Space with its own lock, and a filled Columns is
// read by the offers on every core.
package interest
