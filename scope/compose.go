package scope

import "sort"

// Compose returns one delta that does what a then b do, for a queue that
// coalesces what a peer has not been sent yet: from a's base to b's
// version. Neither input is modified; the result may share their field
// maps, which are never modified either.
//
// A snapshot b replaces everything; b not newer than a (a snapshot taken
// after a delta that is still queued) is already in a. A removal in b
// takes the element out of a's additions and modifications and is kept
// (removing an element a peer lacks changes nothing); an addition
// replaces the element whole; a modification merges into a's addition or
// modification of the element.
func Compose(a, b Delta) Delta {
	switch {
	case b.Full:
		return b
	case b.Ver != 0 && b.Ver <= a.Ver:
		return a
	}
	out := Delta{Base: a.Base, Ver: b.Ver, Full: a.Full}
	if a.Ver == 0 && !a.Full {
		out.Base = b.Base
	}
	out.Added = copyMap(a.Added, len(b.Added))
	out.Modified = copyMap(a.Modified, len(b.Modified))
	var removed map[string]bool
	if !a.Full {
		removed = make(map[string]bool, len(a.Removed)+len(b.Removed))
		for _, id := range a.Removed {
			removed[id] = true
		}
	}
	for _, id := range b.Removed {
		delete(out.Added, id)
		delete(out.Modified, id)
		if removed != nil {
			removed[id] = true
		}
	}
	for id, f := range b.Added {
		delete(out.Modified, id)
		out.Added[id] = f
	}
	for id, f := range b.Modified {
		switch {
		case out.Added[id] != nil:
			out.Added[id] = merge(out.Added[id], f)
		case out.Modified[id] != nil:
			out.Modified[id] = merge(out.Modified[id], f)
		case a.Full:
			out.Added[id] = f
		default:
			out.Modified[id] = f
		}
	}
	for id := range removed {
		out.Removed = append(out.Removed, id)
	}
	sort.Strings(out.Removed)
	if len(out.Added) == 0 {
		out.Added = nil
	}
	if len(out.Modified) == 0 {
		out.Modified = nil
	}
	return out
}

func copyMap(m map[string]Fields, more int) map[string]Fields {
	out := make(map[string]Fields, len(m)+more)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func merge(a, b Fields) Fields {
	out := make(Fields, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
