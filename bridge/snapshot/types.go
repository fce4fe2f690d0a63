package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/solipsism/mesh/gameworld"
)

// Kind is how a field is encoded.
type Kind uint8

// Field kinds.
const (
	// Vec3 is a JSON array of three numbers, each quantized to Precision
	// (default 0.001: 1 mm).
	Vec3 Kind = iota + 1
	// Quat is a rotation as a JSON array [x,y,z,w], normalized and sent as
	// its three smallest components quantized to Precision (default
	// 0.001) and the index of the largest.
	Quat
	// Int is a JSON integer within ±2^31.
	Int
	// Bool is a JSON boolean.
	Bool
	// String is a JSON string of at most MaxStringBytes bytes.
	String
	// JSON is any JSON value, sent whole when it changes.
	JSON
)

func (k Kind) String() string {
	switch k {
	case Vec3:
		return "vec3"
	case Quat:
		return "quat"
	case Int:
		return "int"
	case Bool:
		return "bool"
	case String:
		return "string"
	case JSON:
		return "json"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MaxStringBytes bounds String fields; MaxJSONBytes bounds JSON fields and
// object ids in packets.
const (
	MaxStringBytes = 255
	MaxJSONBytes   = 1000
)

// Field is one replicated property of a ghost type.
type Field struct {
	// Property is the GameObject property the field carries. For the
	// generic type's JSON field, "*" stands for every property.
	Property string
	Kind     Kind
	// Precision is the quantum of Vec3 and Quat fields; zero means 0.001.
	Precision float64
}

// lanes returns how many integer lanes the field's value takes (0 for
// byte-valued kinds).
func (f Field) lanes() int {
	switch f.Kind {
	case Vec3:
		return 3
	case Quat:
		return 4
	case Int, Bool:
		return 1
	}
	return 0
}

func (f Field) precision() float64 {
	if f.Precision > 0 {
		return f.Precision
	}
	return 0.001
}

// GhostType is a typed layout of fields (the protocol's prefab).
type GhostType struct {
	// Name identifies the type; objects name it in their TypeProperty.
	Name   string
	Fields []Field
	// Importance scales how often a ghost of this type is sent when not
	// everything fits; zero means 1.
	Importance int
}

// TypeProperty is the property that names an object's ghost type.
const TypeProperty = "ghostType"

// GenericType replicates any object: every property but ghostType, as one
// JSON object.
var GenericType = GhostType{Name: "generic", Fields: []Field{{Property: "*", Kind: JSON}}}

// TransformType replicates position and rotation at 1 mm and 0.001.
var TransformType = GhostType{Name: "transform", Fields: []Field{{Property: "position", Kind: Vec3}, {Property: "rotation", Kind: Quat}}}

// layout returns the canonical text the type's hash covers.
func (t GhostType) layout() string {
	s := t.Name
	for _, f := range t.Fields {
		s += fmt.Sprintf("|%s:%s:%g", f.Property, f.Kind, f.precision())
	}
	return s
}

// Hash is a stable hash of the type's name and layout.
func (t GhostType) Hash() uint32 {
	h := fnv.New32a()
	h.Write([]byte(t.layout()))
	return h.Sum32()
}

// GUID is the type's 16-byte identity on the wire: a digest of its name.
func (t GhostType) GUID() [16]byte {
	sum := sha256.Sum256([]byte("solipsism-ghost-type:" + t.Name))
	var g [16]byte
	copy(g[:], sum[:])
	return g
}

func (t GhostType) importance() int {
	if t.Importance > 0 {
		return t.Importance
	}
	return 1
}

// validate checks a type definition.
func (t GhostType) validate() error {
	if t.Name == "" || len(t.Fields) == 0 || len(t.Fields) > 32 {
		return fmt.Errorf("snapshot: ghost type %q needs a name and 1 to 32 fields", t.Name)
	}
	for _, f := range t.Fields {
		if f.Kind < Vec3 || f.Kind > JSON || f.Property == "" || f.Precision < 0 {
			return fmt.Errorf("snapshot: ghost type %q: bad field %+v", t.Name, f)
		}
	}
	return nil
}

// value is a field's value: integer lanes or bytes.
type value struct {
	lanes [4]int32
	raw   []byte
}

func (v value) equal(o value) bool { return v.lanes == o.lanes && bytes.Equal(v.raw, o.raw) }

// quantize turns an object's properties into the type's field values.
// A missing or malformed numeric field is its zero value.
func (t GhostType) quantize(props gameworld.Properties) []value {
	vals := make([]value, len(t.Fields))
	for i, f := range t.Fields {
		if f.Property == "*" {
			vals[i].raw = fitJSON(propsJSON(props))
			continue
		}
		raw := props.Value(f.Property)
		switch f.Kind {
		case Vec3:
			var v [3]float64
			readNumbers(raw, v[:])
			for j := range 3 {
				vals[i].lanes[j] = quantum(v[j], f.precision())
			}
		case Quat:
			vals[i].lanes = quantizeQuat(raw, f.precision())
		case Int:
			var n float64
			json.Unmarshal(raw, &n)
			vals[i].lanes[0] = quantum(n, 1)
		case Bool:
			if string(raw) == "true" {
				vals[i].lanes[0] = 1
			}
		case String:
			var s string
			json.Unmarshal(raw, &s)
			if len(s) > MaxStringBytes {
				// Cut at a character boundary.
				n := MaxStringBytes
				for n > 0 && !utf8.RuneStart(s[n]) {
					n--
				}
				s = s[:n]
			}
			vals[i].raw = []byte(s)
		case JSON:
			if len(raw) == 0 {
				raw = json.RawMessage("null")
			}
			vals[i].raw = fitJSON(raw)
		}
	}
	return vals
}

// TooBigProperty names what a json field holds instead of a value over
// MaxJSONBytes: {"$tooBig": the value's size in bytes}. The object is a
// ghost like any other; its client knows the value exists and how big it
// is, and can read it over the WebSocket protocol.
const TooBigProperty = "$tooBig"

// fitJSON returns raw, or what stands for it when it is over MaxJSONBytes.
func fitJSON(raw []byte) []byte {
	if len(raw) <= MaxJSONBytes {
		return raw
	}
	return fmt.Appendf(nil, `{%q:%d}`, TooBigProperty, len(raw))
}

// readNumbers reads a JSON array of numbers into dst as json.Unmarshal into
// an array does, and reports whether raw was one. An array of exactly
// len(dst) plain numbers, what positions and rotations nearly always are,
// is read without reflection: every moving object's every change is read
// here.
func readNumbers(raw []byte, dst []float64) bool {
	if len(raw) > 2 && raw[0] == '[' && raw[len(raw)-1] == ']' {
		body, n := raw[1:len(raw)-1], 0
		for len(body) > 0 && n < len(dst) {
			end := bytes.IndexByte(body, ',')
			if end < 0 {
				end = len(body)
			}
			f, err := strconv.ParseFloat(string(body[:end]), 64)
			if err != nil || !plainNumber(body[:end]) {
				break
			}
			dst[n], n = f, n+1
			if body = body[end:]; len(body) > 0 {
				body = body[1:]
				if len(body) == 0 {
					n = -1 // (a trailing comma: not JSON)
				}
			}
		}
		if n == len(dst) && len(body) == 0 {
			return true
		}
		clear(dst)
	}
	return unmarshalNumbers(raw, dst)
}

// unmarshalNumbers is readNumbers' slow path: json.Unmarshal into an array of
// len(dst).
func unmarshalNumbers(raw []byte, dst []float64) bool {
	switch len(dst) {
	case 3:
		var a [3]float64
		err := json.Unmarshal(raw, &a)
		copy(dst, a[:])
		return err == nil
	default:
		var a [4]float64
		err := json.Unmarshal(raw, &a)
		copy(dst, a[:])
		return err == nil
	}
}

// plainNumber reports whether b is a JSON number (ParseFloat takes more:
// "Inf", "0x1p3", "1_000", ".5", a leading "+").
func plainNumber(b []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// propsJSON encodes every property as one compact object (ghostType
// too: a generic object may name a type this server does not have).
func propsJSON(props gameworld.Properties) []byte {
	b, _ := json.Marshal(props)
	return b
}

// quantum rounds x/q to an int32, saturating.
func quantum(x, q float64) int32 {
	v := math.Round(x / q)
	switch {
	case math.IsNaN(v):
		return 0
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

// quantizeQuat encodes [x,y,z,w] as smallest three: lanes are the index of
// the largest component, then the other three, quantized.
func quantizeQuat(raw json.RawMessage, q float64) [4]int32 {
	var c [4]float64
	if !readNumbers(raw, c[:]) {
		c = [4]float64{0, 0, 0, 1}
	}
	n := math.Sqrt(c[0]*c[0] + c[1]*c[1] + c[2]*c[2] + c[3]*c[3])
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		c, n = [4]float64{0, 0, 0, 1}, 1
	}
	largest := 0
	for i := range c {
		c[i] /= n
		if math.Abs(c[i]) > math.Abs(c[largest]) {
			largest = i
		}
	}
	if c[largest] < 0 { // q and -q are the same rotation
		for i := range c {
			c[i] = -c[i]
		}
	}
	out := [4]int32{int32(largest)}
	j := 1
	for i := range c {
		if i != largest {
			out[j] = quantum(c[i], q)
			j++
		}
	}
	return out
}

// property turns a field's value back into a property value.
func (f Field) property(v value) json.RawMessage {
	switch f.Kind {
	case Vec3:
		p := f.precision()
		return jsonNumbers(float64(v.lanes[0])*p, float64(v.lanes[1])*p, float64(v.lanes[2])*p)
	case Quat:
		p := f.precision()
		var c [4]float64
		largest := int(v.lanes[0]) & 3
		sum, j := 0.0, 1
		for i := range c {
			if i != largest {
				c[i] = float64(v.lanes[j]) * p
				sum += c[i] * c[i]
				j++
			}
		}
		c[largest] = math.Sqrt(max(0, 1-sum))
		return jsonNumbers(c[:]...)
	case Int:
		return json.RawMessage(strconv.Itoa(int(v.lanes[0])))
	case Bool:
		return json.RawMessage(strconv.FormatBool(v.lanes[0] != 0))
	case String:
		b, _ := json.Marshal(string(v.raw))
		return b
	}
	if len(v.raw) == 0 {
		return json.RawMessage("null")
	}
	return v.raw
}

func jsonNumbers(xs ...float64) json.RawMessage {
	b := []byte{'['}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, x, 'g', 10, 64)
	}
	return append(b, ']')
}

// properties reconstructs an object's properties from its field values.
func (t GhostType) properties(vals []value) gameworld.Properties {
	props := map[string]json.RawMessage{}
	for i, f := range t.Fields {
		if f.Property == "*" {
			var m map[string]json.RawMessage
			json.Unmarshal(vals[i].raw, &m)
			for k, v := range m {
				props[k] = v
			}
			continue
		}
		props[f.Property] = f.property(vals[i])
	}
	if t.Name != GenericType.Name {
		b, _ := json.Marshal(t.Name)
		props[TypeProperty] = b
	}
	return gameworld.PropertiesOf(props)
}
