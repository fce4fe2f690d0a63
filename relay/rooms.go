package relay

// inRoom reports whether ls's peer is in room (every peer that announced
// no rooms is in all of them). n.mu must be held.
func (ls *linkState) inRoom(room string) bool {
	return ls.region == nil || ls.region.rooms == nil || ls.region.rooms[room]
}

// inRoomLocked reports whether this node is in room. n.mu must be held.
func (n *Node) inRoomLocked(room string) bool {
	return true
}
