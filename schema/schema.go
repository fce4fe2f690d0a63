package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// DefaultKindProperty is the property naming an object's kind.
const DefaultKindProperty = "kind"

// ErrInvalid is matched (errors.Is) by the errors of a write a schema
// refuses.
var ErrInvalid = errors.New("breaks the property schema")

// Set is a compiled schema file.
type Set struct {
	kindProp string
	kinds    map[string]*jsonschema.Schema
	fallback *jsonschema.Schema
	// parts holds, for kinds whose schema is only "type", "properties",
	// "required" and "additionalProperties" (and annotations), a schema
	// per property: an update, which can neither remove a property nor
	// change another, is checked against those of what it sets alone.
	parts map[string]*parts
	// elements holds, by kind and scope name, the schema of one element's
	// fields (a grid's block).
	elements map[string]map[string]*jsonschema.Schema
}

// parts is a kind's schema, property by property.
type parts struct {
	props map[string]*jsonschema.Schema
	// other checks properties not in props; nil allows them, closed
	// refuses them.
	other  *jsonschema.Schema
	closed bool
}

type file struct {
	KindProperty string                     `json:"kindProperty"`
	Kinds        map[string]json.RawMessage `json:"kinds"`
	Default      json.RawMessage            `json:"default"`
	// Elements maps kinds to their scopes' element schemas.
	Elements map[string]map[string]json.RawMessage `json:"elements"`
}

// Load reads and compiles a schema file.
func Load(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("schema: %s: %w", path, err)
	}
	return s, nil
}

// Parse compiles the JSON of a schema file.
func Parse(data []byte) (*Set, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a schema file: %w", err)
	}
	if len(f.Kinds) == 0 && len(f.Default) == 0 {
		return nil, errors.New(`a schema file needs "kinds" or "default"`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a schema file: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "urn:solipsism:schemas"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s := &Set{kindProp: f.KindProperty, kinds: map[string]*jsonschema.Schema{}, parts: map[string]*parts{}}
	if s.kindProp == "" {
		s.kindProp = DefaultKindProperty
	}
	for k := range f.Kinds {
		sch, err := c.Compile(url + "#/kinds/" + escape(k))
		if err != nil {
			return nil, fmt.Errorf("kind %q: %w", k, err)
		}
		s.kinds[k] = sch
		if p, err := compileParts(c, url+"#/kinds/"+escape(k), f.Kinds[k]); err != nil {
			return nil, fmt.Errorf("kind %q: %w", k, err)
		} else if p != nil {
			s.parts[k] = p
		}
	}
	if len(f.Default) > 0 {
		if s.fallback, err = c.Compile(url + "#/default"); err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
	}
	for k, scopes := range f.Elements {
		for name := range scopes {
			sch, err := c.Compile(url + "#/elements/" + escape(k) + "/" + escape(name))
			if err != nil {
				return nil, fmt.Errorf("elements of kind %q, scope %q: %w", k, name, err)
			}
			if s.elements == nil {
				s.elements = map[string]map[string]*jsonschema.Schema{}
			}
			if s.elements[k] == nil {
				s.elements[k] = map[string]*jsonschema.Schema{}
			}
			s.elements[k][name] = sch
		}
	}
	return s, nil
}

// compileParts compiles a kind's schema property by property, if it is of
// the plain form parts serves; else it returns nil.
func compileParts(c *jsonschema.Compiler, loc string, raw json.RawMessage) (*parts, error) {
	var kw map[string]json.RawMessage
	if json.Unmarshal(raw, &kw) != nil {
		return nil, nil
	}
	for k := range kw {
		switch k {
		case "type", "properties", "required", "additionalProperties", "title", "description", "$comment":
		default:
			return nil, nil
		}
	}
	if t, ok := kw["type"]; ok && string(bytes.TrimSpace(t)) != `"object"` {
		return nil, nil
	}
	var props map[string]json.RawMessage
	if raw, ok := kw["properties"]; ok && json.Unmarshal(raw, &props) != nil {
		return nil, nil
	}
	p := &parts{props: map[string]*jsonschema.Schema{}}
	for name := range props {
		sch, err := c.Compile(loc + "/properties/" + escape(name))
		if err != nil {
			return nil, err
		}
		p.props[name] = sch
	}
	if raw, ok := kw["additionalProperties"]; ok {
		switch string(bytes.TrimSpace(raw)) {
		case "false":
			p.closed = true
		case "true":
		default:
			sch, err := c.Compile(loc + "/additionalProperties")
			if err != nil {
				return nil, err
			}
			p.other = sch
		}
	}
	return p, nil
}

// escape makes a kind name a JSON pointer token, in a URL fragment.
func escape(k string) string {
	k = strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
	var sb strings.Builder
	for _, b := range []byte(k) {
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-._~", b) >= 0 {
			sb.WriteByte(b)
		} else {
			fmt.Fprintf(&sb, "%%%02X", b)
		}
	}
	return sb.String()
}

// Kinds returns the kinds the set has schemas for.
func (s *Set) Kinds() []string {
	out := make([]string, 0, len(s.kinds))
	for k := range s.kinds {
		out = append(out, k)
	}
	return out
}

// Check reports why a change would leave its object breaking its kind's
// schema (errors.Is ErrInvalid), or nil. existing is the object before the
// change (nil for a new one). Removes and transfers change no property
// and pass.
func (s *Set) Check(c gameworld.Change, existing *gameworld.Object) error {
	if s == nil || (c.Type != gameworld.Add && c.Type != gameworld.Update) {
		return nil
	}
	if err := s.checkElements(c, existing); err != nil {
		return err
	}
	after := c.Properties
	if existing != nil && c.Type == gameworld.Update {
		if err, ok := s.checkParts(c.Properties, existing.Properties); ok {
			return err
		}
	}
	if existing != nil {
		after = existing.Properties.Merge(c.Properties)
	}
	return s.CheckProperties(after)
}

// checkElements checks the elements a change's scope deltas add or modify
// (each as it would be after) against its kind's element schemas. A scope
// without one is not checked.
func (s *Set) checkElements(c gameworld.Change, existing *gameworld.Object) error {
	if len(c.Scopes) == 0 || len(s.elements) == 0 {
		return nil
	}
	var kind string
	raw, ok := c.Properties.Get(s.kindProp)
	if !ok && existing != nil {
		raw, ok = existing.Properties.Get(s.kindProp)
	}
	if !ok || json.Unmarshal(raw, &kind) != nil || s.elements[kind] == nil {
		return nil
	}
	for name, d := range c.Scopes {
		sch := s.elements[kind][name]
		if sch == nil {
			continue
		}
		check := func(id string, f scope.Fields) error {
			inst := make(map[string]any, len(f))
			for k, v := range f {
				var x any
				if json.Unmarshal(v, &x) != nil {
					return fmt.Errorf("%w: scope %q, element %q: field %q is not JSON", ErrInvalid, name, id, k)
				}
				inst[k] = x
			}
			if err := sch.Validate(inst); err != nil {
				var ve *jsonschema.ValidationError
				if !errors.As(err, &ve) {
					return fmt.Errorf("%w: %v", ErrInvalid, err)
				}
				return fmt.Errorf("%w of kind %q: scope %q, element %q: %s", ErrInvalid, kind, name, id, reason(ve))
			}
			return nil
		}
		for id, f := range d.Added {
			if err := check(id, f); err != nil {
				return err
			}
		}
		for id, f := range d.Modified {
			after := scope.Fields{}
			if existing != nil && !d.Full && !slices.Contains(d.Removed, id) {
				if cur, ok := existing.Scopes.Get(name, id); ok {
					maps.Copy(after, cur)
				}
			}
			maps.Copy(after, f)
			if err := check(id, after); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkParts checks an update property by property, if its object's kind
// has parts and the update keeps the kind; ok is false otherwise.
func (s *Set) checkParts(changed, before gameworld.Properties) (err error, ok bool) {
	var kind string
	if json.Unmarshal(before.Value(s.kindProp), &kind) != nil {
		return nil, false
	}
	p := s.parts[kind]
	if p == nil {
		return nil, false
	}
	if raw, changes := changed.Get(s.kindProp); changes && string(raw) != string(before.Value(s.kindProp)) {
		return nil, false
	}
	for name, raw := range changed.All() {
		sch := p.props[name]
		if sch == nil && p.closed {
			return fmt.Errorf("%w of kind %q: at '': additional properties '%s' not allowed", ErrInvalid, kind, name), true
		}
		if sch == nil {
			sch = p.other
		}
		if sch == nil {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return fmt.Errorf("%w: property %q is not JSON", ErrInvalid, name), true
		}
		if err := sch.Validate(v); err != nil {
			var ve *jsonschema.ValidationError
			if !errors.As(err, &ve) {
				return fmt.Errorf("%w: %v", ErrInvalid, err), true
			}
			return fmt.Errorf("%w of kind %q: %s", ErrInvalid, kind, strings.ReplaceAll(reason(ve), "at '", "at '/"+name)), true
		}
	}
	return nil, true
}

// CheckProperties reports why an object with these properties breaks its
// kind's schema, or nil.
func (s *Set) CheckProperties(props gameworld.Properties) error {
	if s == nil {
		return nil
	}
	var kind string
	sch := s.fallback
	if raw, ok := props.Get(s.kindProp); ok && json.Unmarshal(raw, &kind) == nil {
		if k, ok := s.kinds[kind]; ok {
			sch = k
		}
	}
	if sch == nil {
		return nil
	}
	// One decode of the whole object, numbers as float64: the validator
	// compares json.Number through big.Rat, several times slower, and a
	// property schema's bounds are not about the 17th digit.
	buf := []byte("{}")
	if !props.IsZero() {
		buf, _ = props.MarshalJSON()
	}
	var inst map[string]any
	if err := json.Unmarshal(buf, &inst); err != nil {
		return fmt.Errorf("%w: a property is not JSON", ErrInvalid)
	}
	err := sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	name := "kind " + fmt.Sprintf("%q", kind)
	if sch == s.fallback {
		name = "the default schema"
	}
	return fmt.Errorf("%w of %s: %s", ErrInvalid, name, reason(ve))
}

// reason sums up a validation error in one line: where and what, for each
// leaf cause.
func reason(ve *jsonschema.ValidationError) string {
	lines := strings.Split(ve.Error(), "\n")
	var out []string
	for _, l := range lines[1:] {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if l != "" && !strings.HasSuffix(l, ": validation failed") { // (a group: its causes follow)
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(lines[0])
	}
	return strings.Join(out, "; ")
}
