package alloverse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// PatchStyle chooses the form of diffs.
type PatchStyle uint8

const (
	// Smallest sends whichever of merge and apply encodes smaller.
	Smallest PatchStyle = iota
	// Merge sends RFC 7396 merge patches, and apply where merge cannot
	// express the change.
	Merge
	// Apply sends RFC 6902 patches.
	Apply
)

// ParsePatchStyle parses "smallest", "merge" or "apply".
func ParsePatchStyle(s string) (PatchStyle, error) {
	switch s {
	case "", "smallest":
		return Smallest, nil
	case "merge":
		return Merge, nil
	case "apply":
		return Apply, nil
	}
	return 0, fmt.Errorf("alloverse: unknown patch style %q (want smallest, merge or apply)", s)
}

// diffPacket builds the packet that takes a client from base (in history)
// to the current revision.
func (s *state) diffPacket(base uint64) []byte {
	changes := s.changesSince(base)
	return s.diffOf(base, slices.Sorted(maps.Keys(changes)), changes, s.entity, false)
}

// diffOf builds the diff of changes (of the entities ids, sorted) from
// base, for a document whose entities ent gives, in the form the style
// asks; for a client that takes only merge patches (mergeOnly), a merge
// patch, or nil where merge cannot say it.
func (s *state) diffOf(base uint64, ids []string, changes map[string]*change, ent func(string) *entity, mergeOnly bool) []byte {
	var merge []byte
	smaller := false
	if s.style != Apply || mergeOnly {
		merge, smaller = s.mergePacket(base, ids, changes, ent)
	}
	if mergeOnly || merge != nil && (s.style == Merge || smaller) {
		return merge
	}
	apply := s.applyPacket(base, ids, changes, ent)
	if merge != nil && len(merge) <= len(apply) {
		return merge
	}
	return apply
}

// entity returns the document's entity id, or nil.
func (s *state) entity(id string) *entity { return s.entities[id] }

// applyPacket builds an RFC 6902 diff, for a document whose entities ent
// gives (s.entity, or a client's view).
func (s *state) applyPacket(base uint64, ids []string, changes map[string]*change, ent func(string) *entity) []byte {
	b := []byte(`{"patch_style":"apply","patch_from":`)
	b = strconv.AppendUint(b, base, 10)
	b = append(b, `,"patches":[`...)
	for _, id := range ids {
		c, e := changes[id], ent(id)
		path := "/entities/" + escapePointer(id)
		switch {
		case e == nil && c.existed:
			b = appendOp(b, "remove", path, nil)
		case e == nil:
		case !c.existed:
			b = appendOp(b, "add", path, appendEntity(nil, id, e.all()))
		default:
			for _, k := range slices.Sorted(maps.Keys(c.base)) {
				old, now := c.base[k], e.comps[k]
				switch {
				case bytes.Equal(old, now):
				case now == nil:
					b = appendOp(b, "remove", path+"/components/"+escapePointer(k), nil)
				default:
					// add replaces an existing member (RFC 6902 4.1).
					b = appendOp(b, "add", path+"/components/"+escapePointer(k), now)
				}
			}
			// A scope changes element by element.
			for _, name := range slices.Sorted(maps.Keys(c.elems)) {
				sp := path + "/components/" + escapePointer(name)
				if c.scopeNew[name] {
					b = appendOp(b, "add", sp, appendComponents(nil, e.scopes[name]))
					continue
				}
				for _, k := range slices.Sorted(maps.Keys(c.elems[name])) {
					old, now := c.elems[name][k], e.scopes[name][k]
					switch {
					case bytes.Equal(old, now):
					case now == nil:
						b = appendOp(b, "remove", sp+"/"+escapePointer(k), nil)
					default:
						b = appendOp(b, "add", sp+"/"+escapePointer(k), now)
					}
				}
			}
		}
	}
	b = appendOp(b, "replace", "/revision", strconv.AppendUint(nil, s.rev, 10))
	b[len(b)-1] = ']' // the last op's comma
	return append(b, '}')
}

func appendOp(b []byte, op, path string, value []byte) []byte {
	b = append(b, `{"op":"`...)
	b = append(b, op...)
	b = append(b, `","path":`...)
	b = appendString(b, path)
	if value != nil {
		b = append(b, `,"value":`...)
		b = append(b, value...)
	}
	return append(b, "},"...)
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return pointerEscaper.Replace(s)
}

// mergePacket builds an RFC 7396 diff, or returns nil if merge cannot
// express the change exactly. smaller reports that the diff is certainly
// no larger than the apply form: per entity and component, merge writes
// less than an operation with its path, unless a component's merge patch
// (nulls for removed members) is longer than its new value. ent gives
// the document's entities (s.entity, or a client's view).
func (s *state) mergePacket(base uint64, ids []string, changes map[string]*change, ent func(string) *entity) (pkt []byte, smaller bool) {
	smaller = true
	b := []byte(`{"patch_style":"merge","patch_from":`)
	b = strconv.AppendUint(b, base, 10)
	b = append(b, `,"entities":{`...)
	n := 0
	for _, id := range ids {
		c, e := changes[id], ent(id)
		var v []byte
		switch {
		case e == nil && c.existed:
			v = []byte("null")
		case e == nil:
			continue
		case !c.existed:
			all := e.all()
			for _, cv := range all {
				if hasMemberNull(cv) {
					return nil, false
				}
			}
			v = appendEntity(nil, id, all)
		default:
			mv, cached := s.vals[c]
			if !cached {
				mv = s.mergeValue(c, e)
				if s.vals != nil {
					s.vals[c] = mv
				}
			}
			if !mv.ok {
				return nil, false
			}
			if mv.bigger {
				smaller = false
			}
			if mv.v == nil {
				continue
			}
			v = mv.v
		}
		b = appendMember(b, n > 0, id, v)
		n++
	}
	b = append(b, `},"revision":`...)
	b = strconv.AppendUint(b, s.rev, 10)
	return append(b, '}'), smaller
}

// mergeVal is the merge patch of one entity that existed at the base and
// exists now: v (nil if nothing changed), ok false if merge cannot say
// it, bigger if it is longer than the component's new value.
type mergeVal struct {
	v          []byte
	ok, bigger bool
}

// mergeValue builds the mergeVal of an entity, now e, from its change c.
func (s *state) mergeValue(c *change, e *entity) (mv mergeVal) {
	comps := []byte{'{'}
	m := 0
	for _, k := range slices.Sorted(maps.Keys(c.base)) {
		old, now := c.base[k], e.comps[k]
		var p []byte
		switch {
		case bytes.Equal(old, now):
			continue
		case now == nil:
			p = []byte("null")
		default:
			var ok bool
			if p, ok = mergeDiff(old, now); !ok {
				return mergeVal{}
			}
			if len(p) > len(now) {
				mv.bigger = true
			}
		}
		comps = appendMember(comps, m > 0, k, p)
		m++
	}
	// A scope's patch names the elements that changed alone.
	for _, name := range slices.Sorted(maps.Keys(c.elems)) {
		var p []byte
		if c.scopeNew[name] {
			p = appendComponents(nil, e.scopes[name])
			if hasMemberNull(p) {
				return mergeVal{}
			}
		} else {
			p = []byte{'{'}
			for _, k := range slices.Sorted(maps.Keys(c.elems[name])) {
				old, now := c.elems[name][k], e.scopes[name][k]
				if bytes.Equal(old, now) {
					continue
				}
				ep := []byte("null")
				if now != nil {
					var ok bool
					if ep, ok = mergeDiff(old, now); !ok {
						return mergeVal{}
					}
				}
				p = appendMember(p, len(p) > 1, k, ep)
			}
			if len(p) == 1 {
				continue
			}
			p = append(p, '}')
		}
		comps = appendMember(comps, m > 0, name, p)
		m++
	}
	mv.ok = true
	if m == 0 {
		return mv
	}
	mv.v = append([]byte(`{"components":`), comps...)
	mv.v = append(mv.v, "}}"...)
	return mv
}

// appendMember appends the member key: v of a JSON object, after a comma
// unless it is the first.
func appendMember(b []byte, comma bool, key string, v []byte) []byte {
	if comma {
		b = append(b, ',')
	}
	b = appendString(b, key)
	b = append(b, ':')
	return append(b, v...)
}

// mergeDiff returns the merge patch that turns old into now (old may be nil:
// absent), or false if none exists: merge cannot set a member to null.
func mergeDiff(old, now json.RawMessage) ([]byte, bool) {
	no, nowObj := object(now)
	if !nowObj {
		return now, !isNull(now) && !hasMemberNull(now)
	}
	oo, oldObj := object(old)
	if !oldObj {
		// Merged onto a non-object, the patch is applied to {}.
		return now, !hasMemberNull(now)
	}
	b := []byte{'{'}
	n := 0
	add := func(k string, v []byte) {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, v...)
		n++
	}
	for _, k := range slices.Sorted(maps.Keys(oo)) {
		if _, ok := no[k]; !ok {
			add(k, []byte("null"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(no)) {
		ov, had := oo[k]
		if had && bytes.Equal(ov, no[k]) {
			continue
		}
		p, ok := mergeDiff(ov, no[k])
		if !ok {
			return nil, false
		}
		add(k, p)
	}
	return append(b, '}'), true
}

// object decodes v's members if v is a JSON object.
func object(v json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return nil, false
	}
	return m, true
}

// hasMemberNull reports whether v holds, at any depth, an object with a
// null member. Through objects, a merge patch would remove such a member
// instead of setting it. Arrays are replaced whole by RFC 7396, but
// evanphx/json-patch (and so Go clients) drops null members of objects
// inside them, so such values are not sent as merges either.
func hasMemberNull(v json.RawMessage) bool {
	if !bytes.Contains(v, []byte("null")) {
		return false
	}
	switch {
	case len(v) > 0 && v[0] == '[':
		var a []json.RawMessage
		if json.Unmarshal(v, &a) != nil {
			return false
		}
		for _, e := range a {
			if hasMemberNull(e) {
				return true
			}
		}
		return false
	}
	m, ok := object(v)
	if !ok {
		return false
	}
	for _, mv := range m {
		if isNull(mv) || hasMemberNull(mv) {
			return true
		}
	}
	return false
}
