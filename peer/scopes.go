package peer

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// FeatureScopes is the feature of peers that take scope deltas: change
// records with a "scopes" key (docs/protocol.md, "Scopes"). Others are
// sent each scope whole, as an ordinary property of its name, in every
// record that changes it.
const FeatureScopes = "scopes"

// TypeScopeChange is a message of scope deltas alone, by object id: the
// updates a worldChange would carry, in fewer bytes, sent to peers with
// FeatureScopes (docs/protocol.md, "Scopes").
const TypeScopeChange = "scopeChange"

// MaxScopes bounds the scopes one change record names.
const MaxScopes = 16

// decodeScopes decodes a record's "scopes" value: an object of scope
// names to deltas (scope.Delta's JSON), or null.
func (l Limits) decodeScopes(v []byte) (map[string]scope.Delta, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, invalid("scopes is not an object")
	}
	if len(raw) == 0 {
		return nil, nil
	}
	if len(raw) > MaxScopes {
		return nil, invalid("%d scopes in one record (limit %d)", len(raw), MaxScopes)
	}
	out := make(map[string]scope.Delta, len(raw))
	for name, b := range raw {
		if err := l.checkID("scope name", name); err != nil {
			return nil, err
		}
		if depth(b) > l.MaxDepth {
			return nil, invalid("scope %q nested %d deep (limit %d)", name, depth(b), l.MaxDepth)
		}
		d, err := scope.Limits{MaxIDBytes: l.MaxIDLength}.DecodeDelta(b)
		if err != nil {
			return nil, invalid("scope %q: %v", name, err)
		}
		out[name] = d
	}
	return out, nil
}

// appendScopes appends `"scopes":{name:delta,…}`, names sorted.
func appendScopes(dst []byte, m map[string]scope.Delta) []byte {
	return appendScopesValue(append(dst, `,"scopes":`...), m)
}

// appendScopesValue appends what a record's "scopes" holds, names sorted.
func appendScopesValue(dst []byte, m map[string]scope.Delta) []byte {
	names := slices.Sorted(maps.Keys(m))
	dst = append(dst, '{')
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, name)
		dst = append(dst, ':')
		dst = m[name].AppendJSON(dst) // (fields are valid JSON: decoders and the world check them)
	}
	return append(dst, '}')
}

// scopesOnly reports whether c is an update of scopes alone: one a
// scopeChange can carry, and that leaves out owner and properties.
func scopesOnly(c *gameworld.Change) bool {
	return c.Type == gameworld.Update && len(c.Scopes) > 0 && c.Properties.Empty()
}

// appendScopeEntry appends r as an entry of a scopeChange: its id and
// its scopes. r must be scopesOnly.
func appendScopeEntry(dst []byte, r *Record) []byte {
	dst = appendString(dst, r.ID)
	dst = append(dst, ':')
	return appendScopesValue(dst, r.Scopes)
}

// appendLegacyChange appends c for a peer that takes no scope deltas: each
// scope it changes becomes a property of its name holding the scope
// whole, as whole holds it now.
func appendLegacyChange(dst []byte, c gameworld.Change, whole *gameworld.Scopes) []byte {
	props := c.Properties
	if len(c.Scopes) > 0 && c.Type != gameworld.Remove {
		var pb gameworld.PropertiesBuilder
		for name, d := range c.Scopes {
			if b, ok := whole.AppendJSON(nil, name); ok {
				pb.Add(name, b)
			} else if d.Full {
				// (A record of no world's: its snapshot is the scope.)
				b, _ := json.Marshal(d.Added)
				if d.Added == nil {
					b = []byte("{}")
				}
				pb.Add(name, b)
			}
		}
		props = props.Merge(pb.Build())
	}
	c.Properties, c.Scopes = props, nil
	return AppendChange(dst, c)
}
