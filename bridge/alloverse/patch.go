package alloverse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-json-experiment/json/jsontext"
)

// maxCopyGrowth bounds how much a patch's copy operations may grow a
// document: a hostile patch could otherwise double it with every op.
const maxCopyGrowth = 64 << 20

// ApplyPatch applies an RFC 6902 patch to doc. Operations other than
// "test" are applied by github.com/evanphx/json-patch/v5 (negative indices
// off, as in the RFC); "test" is evaluated here. A patch that fails, is
// malformed, or makes the library panic is an error; doc is not modified.
func ApplyPatch(doc, patch []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("alloverse: patch failed: %v", r)
		}
	}()
	if !jsontext.Value(patch).IsValid() {
		// Also catches an operation with two members of one name, which
		// json.Unmarshal would silently take the last of.
		return nil, errors.New("alloverse: patch is not valid JSON without duplicate member names")
	}
	var ops []map[string]json.RawMessage
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("alloverse: patch is not a list of operations: %w", err)
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false
	opts.AccumulatedCopySizeLimit = maxCopyGrowth
	out = doc
	var run jsonpatch.Patch
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		var err error
		out, err = run.ApplyWithOptions(out, opts)
		run = run[:0]
		return err
	}
	for i, op := range ops {
		name, err := checkOp(op)
		if err != nil {
			return nil, fmt.Errorf("alloverse: operation %d: %w", i, err)
		}
		if path := op["path"]; string(path) == `""` && (name == "add" || name == "replace") {
			// The whole document (RFC 6902 4.1, 4.3), which the library
			// cannot do for a document that is not an object or array.
			if err := flush(); err != nil {
				return nil, fmt.Errorf("alloverse: operation before %d: %w", i, err)
			}
			out = op["value"]
			continue
		}
		if name != "test" {
			o := make(jsonpatch.Operation, len(op))
			for k, v := range op {
				o[k] = &v
			}
			run = append(run, o)
			continue
		}
		if err := flush(); err != nil {
			return nil, fmt.Errorf("alloverse: operation before %d: %w", i, err)
		}
		if err := testOp(out, op); err != nil {
			return nil, fmt.Errorf("alloverse: operation %d: %w", i, err)
		}
	}
	if err := flush(); err != nil {
		return nil, fmt.Errorf("alloverse: %w", err)
	}
	return out, nil
}

// checkOp checks that an operation has the members its kind requires
// (RFC 6902 section 4) and returns its name.
func checkOp(op map[string]json.RawMessage) (string, error) {
	var name, path string
	if err := json.Unmarshal(op["op"], &name); err != nil {
		return "", errors.New("missing or invalid 'op'")
	}
	if err := json.Unmarshal(op["path"], &path); err != nil {
		return "", errors.New("missing or invalid 'path'")
	}
	switch name {
	case "add", "replace", "test":
		if op["value"] == nil {
			return "", fmt.Errorf("%s without 'value'", name)
		}
	case "move", "copy":
		var from string
		if err := json.Unmarshal(op["from"], &from); err != nil {
			return "", fmt.Errorf("%s without a valid 'from'", name)
		}
	case "remove":
	default:
		return "", fmt.Errorf("unknown operation %q", name)
	}
	return name, nil
}

// testOp evaluates a "test" operation against doc (RFC 6902 section 4.6).
func testOp(doc []byte, op map[string]json.RawMessage) error {
	var path string
	json.Unmarshal(op["path"], &path)
	root, err := decodeJSON(doc)
	if err != nil {
		return err
	}
	want, err := decodeJSON(op["value"])
	if err != nil {
		return err
	}
	got, err := resolve(root, path)
	if err != nil {
		return err
	}
	if !jsonEqual(got, want) {
		return fmt.Errorf("test failed at %q", path)
	}
	return nil
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return v, nil
}

var (
	validEscapes     = strings.NewReplacer("~0", "", "~1", "")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// resolve evaluates a JSON Pointer (RFC 6901) in v.
func resolve(v any, pointer string) (any, error) {
	if pointer == "" {
		return v, nil
	}
	if pointer[0] != '/' {
		return nil, fmt.Errorf("pointer %q does not start with /", pointer)
	}
	for _, tok := range strings.Split(pointer[1:], "/") {
		if strings.Contains(validEscapes.Replace(tok), "~") {
			return nil, fmt.Errorf("pointer %q has an invalid escape", pointer)
		}
		tok = pointerUnescaper.Replace(tok)
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("pointer %q: no member %q", pointer, tok)
			}
			v = next
		case []any:
			i, err := arrayIndex(tok, len(c))
			if err != nil {
				return nil, fmt.Errorf("pointer %q: %w", pointer, err)
			}
			v = c[i]
		default:
			return nil, fmt.Errorf("pointer %q goes through a scalar", pointer)
		}
	}
	return v, nil
}

// arrayIndex parses an array index token: digits without leading zeros.
func arrayIndex(tok string, n int) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.TrimLeft(tok, "0123456789") != "" {
		return 0, fmt.Errorf("invalid array index %q", tok)
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i >= n {
		return 0, fmt.Errorf("array index %q out of range", tok)
	}
	return i, nil
}

// jsonEqual compares decoded JSON values as RFC 6902 section 4.6 does:
// numbers by value, objects regardless of member order.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		return numberEqual(string(x), string(y))
	default:
		return a == b
	}
}

// numberEqual compares JSON numbers by value. Exact rational comparison
// of a number like 1e999999999 would take forever: such exponents are
// compared as written.
func numberEqual(a, b string) bool {
	if hugeExponent(a) || hugeExponent(b) {
		return a == b
	}
	p, ok1 := new(big.Rat).SetString(a)
	q, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && p.Cmp(q) == 0
}

func hugeExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return false
	}
	e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err != nil || e > 400 || e < -400
}

// MergePatch applies an RFC 7396 merge patch to doc.
//
// It is written here rather than taken from github.com/evanphx/json-patch/v5,
// whose objects keep their members' names in a slice scanned on every set
// and remove: a patch that touches the n entities of a place costs n² (8 s
// for 20,000 entities, about two minutes for 100,000), while a client of a
// big place takes one every heartbeat. This one costs what the document
// and the patch weigh: an object of the patch is merged into its target
// decoded one level at a time, members the patch does not name kept as
// they are.
func MergePatch(doc, patch []byte) ([]byte, error) {
	if !json.Valid(doc) {
		return nil, errors.New("alloverse: merge patch: the document is not JSON")
	}
	if !json.Valid(patch) {
		return nil, errors.New("alloverse: merge patch: the patch is not JSON")
	}
	out, err := mergeValue(doc, patch)
	if err != nil {
		return nil, fmt.Errorf("alloverse: merge patch: %w", err)
	}
	return out, nil
}

// mergeValue is RFC 7396's MergePatch(Target, Patch) on valid JSON values
// (target nil when absent).
func mergeValue(target, patch json.RawMessage) (json.RawMessage, error) {
	if !isObject(patch) {
		return patch, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(patch, &members); err != nil {
		return nil, err
	}
	merged := map[string]json.RawMessage{}
	if isObject(target) {
		if err := json.Unmarshal(target, &merged); err != nil {
			return nil, err
		}
	}
	for name, v := range members {
		if isNull(v) {
			delete(merged, name)
			continue
		}
		m, err := mergeValue(merged[name], v)
		if err != nil {
			return nil, err
		}
		merged[name] = m
	}
	return encodeObject(merged), nil
}

// encodeObject writes an object of valid JSON values, members sorted by
// name (json.Marshal would check every value again, nested ones at every
// level).
func encodeObject(m map[string]json.RawMessage) []byte {
	size := 2
	for name, v := range m {
		size += len(name) + len(v) + 4
	}
	b := append(make([]byte, 0, size), '{')
	for i, name := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = jsontext.AppendQuote(b, name) // (a name from valid JSON quotes)
		b = append(append(b, ':'), m[name]...)
	}
	return append(b, '}')
}

// isObject reports whether the JSON value v is an object.
func isObject(v []byte) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && v[0] == '{'
}
