package snapshot

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
)

// roundTrip quantizes props with t, encodes them against no baseline, one
// and two baselines, decodes, and returns what the receiver reconstructs.
func roundTrip(t *testing.T, typ GhostType, props gameworld.Properties) []gameworld.Properties {
	t.Helper()
	vals := typ.quantize(props)
	var prev1, prev2 []value
	prev1 = typ.quantize(gameworld.PropertiesOf(map[string]json.RawMessage{}))
	prev2 = prev1
	var outs []gameworld.Properties
	for _, c := range []struct {
		codec  ghostCodec
		b0, b1 *base
	}{
		{ghostCodec{tick: 10}, nil, nil},
		{ghostCodec{tick: 10, t0: 8}, &base{vals: prev1}, nil},
		{ghostCodec{tick: 10, t0: 8, t1: 5}, &base{vals: prev1, size: 40, mask: 1}, &base{vals: prev2}},
	} {
		var w, scratch Writer
		piece := &bufPiece{name: "blocks", clears: [][2]string{{"", "9"}}, entries: []bufEntry{{id: "1,2,3", fields: []byte(`{"c":1}`)}, {id: "4,4,4"}},
			defs: []string{"c"}, idx: map[string]int{"c": 0}}
		mask, size := c.codec.encode(&w, &scratch, &typ, vals, c.b0, c.b1, []*bufPiece{piece})
		got, pieces, gmask, gsize, err := c.codec.decode(NewReader(w.Bytes()), &typ, c.b0, c.b1)
		if err != nil {
			t.Fatal(err)
		}
		if len(pieces) == 1 {
			if _, err := pieces[0].resolve(nil); err != nil {
				t.Fatal(err)
			}
		}
		if len(pieces) != 1 || pieces[0].name != "blocks" || fmt.Sprint(pieces[0].clears) != "[[ 9]]" || len(pieces[0].entries) != 2 ||
			string(pieces[0].entries[0].fields) != `{"c":1}` || pieces[0].entries[1].fields != nil {
			t.Fatalf("the buffer decoded as %+v", pieces)
		}
		if gmask != mask || gsize != size {
			t.Fatalf("mask %b size %d, decoded %b %d", mask, size, gmask, gsize)
		}
		outs = append(outs, typ.properties(got))
	}
	return outs
}

func numbers(t *testing.T, raw json.RawMessage) []float64 {
	t.Helper()
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

func TestVec3Precision(t *testing.T) {
	for _, prec := range []float64{0, 0.01, 0.0001} {
		typ := GhostType{Name: "p", Fields: []Field{{Property: "position", Kind: Vec3, Precision: prec}}}
		q := typ.Fields[0].precision()
		for _, v := range [][3]float64{{0, 0, 0}, {q / 2 * 0.999, -q / 2 * 0.999, q * 1.5}, {1234.5678, -2000.0004, 0.001}, {2e5, -2e5, 3.14159}} {
			t.Run(fmt.Sprint(prec, v), func(t *testing.T) {
				raw, _ := json.Marshal(v)
				for _, out := range roundTrip(t, typ, gameworld.PropertiesOf(map[string]json.RawMessage{"position": raw})) {
					got := numbers(t, out.Value("position"))
					for i := range 3 {
						if math.Abs(got[i]-v[i]) > q/2+1e-9 {
							t.Errorf("axis %d: %v for %v (precision %v)", i, got[i], v[i], q)
						}
					}
				}
			})
		}
	}
}

func TestQuatPrecision(t *testing.T) {
	typ := TransformType
	for _, q := range [][4]float64{{0, 0, 0, 1}, {0, 0, 0, -1}, {1, 0, 0, 0}, {0.5, -0.5, 0.5, -0.5}, {0.1, 0.7, -0.2, 0.68}, {0, 0.7071, 0, 0.7071}, {3, 0, 4, 0}} {
		t.Run(fmt.Sprint(q), func(t *testing.T) {
			raw, _ := json.Marshal(q)
			n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
			for _, out := range roundTrip(t, typ, gameworld.PropertiesOf(map[string]json.RawMessage{"rotation": raw, "ghostType": json.RawMessage(`"transform"`)})) {
				got := numbers(t, out.Value("rotation"))
				dot := 0.0
				for i := range 4 {
					dot += got[i] * q[i] / n
				}
				// q and -q are one rotation; each component is within 0.0005.
				if math.Abs(dot) < 1-2e-6*4 {
					t.Errorf("%v came back as %v (dot %v)", q, got, dot)
				}
				if string(out.Value("ghostType")) != `"transform"` {
					t.Errorf("ghostType %s", out.Value("ghostType"))
				}
			}
		})
	}
}

func TestScalarFields(t *testing.T) {
	typ := GhostType{Name: "s", Fields: []Field{
		{Property: "n", Kind: Int}, {Property: "on", Kind: Bool}, {Property: "name", Kind: String}, {Property: "meta", Kind: JSON},
	}}
	long := strings.Repeat("é", 200)
	for _, c := range []struct {
		props, want map[string]string
	}{
		{map[string]string{"n": "2147483647", "on": "true", "name": `"ok"`, "meta": `{"a":[1,null]}`},
			map[string]string{"n": "2147483647", "on": "true", "name": `"ok"`, "meta": `{"a":[1,null]}`}},
		{map[string]string{"n": "-2147483648", "on": "false", "name": `""`, "meta": `null`},
			map[string]string{"n": "-2147483648", "on": "false", "name": `""`, "meta": `null`}},
		{map[string]string{"n": "1e12", "name": `"` + long + `"`},
			map[string]string{"n": "2147483647", "on": "false", "name": `"` + long[:MaxStringBytes-1] + `"` /* cut at a character */, "meta": `null`}},
	} {
		t.Run(c.props["n"], func(t *testing.T) {
			props := gameworld.PropertiesOf(map[string]json.RawMessage{})
			for k, v := range c.props {
				props = props.With(k, json.RawMessage(v))
			}
			for _, out := range roundTrip(t, typ, props) {
				for k, want := range c.want {
					if string(out.Value(k)) != want {
						t.Errorf("%s = %s, want %s", k, out.Value(k), want)
					}
				}
			}
		})
	}
}

// The generic type carries every property, a ghostType naming a type the
// server lacks too.
func TestGenericTypeCarriesEveryProperty(t *testing.T) {
	props := gameworld.PropertiesOf(map[string]json.RawMessage{"a": json.RawMessage(`[1,2]`), "b/c": json.RawMessage(`"ü"`), "ghostType": json.RawMessage(`"nope"`)})
	for _, out := range roundTrip(t, GenericType, props) {
		if !out.Equal(props) {
			t.Errorf("got %v, want %v", out, props)
		}
	}
}

func TestTypeHash(t *testing.T) {
	a := GhostType{Name: "x", Fields: []Field{{Property: "p", Kind: Vec3}}}
	b := GhostType{Name: "x", Fields: []Field{{Property: "p", Kind: Vec3, Precision: 0.01}}}
	c := GhostType{Name: "x", Fields: []Field{{Property: "p", Kind: Vec3, Precision: 0.001}}}
	if a.Hash() == b.Hash() || a.Hash() != c.Hash() || a.GUID() != b.GUID() {
		t.Error("the hash covers the layout, the GUID the name")
	}
}

// A quat's first lane, the index of its largest component, is predicted as
// the newest baseline's, never linearly: from indexes 0 then 1, a linear
// prediction would say 2.
func TestQuatIndexPredictedFromNewestBaseline(t *testing.T) {
	ty := GhostType{Name: "q", Fields: []Field{{Property: "r", Kind: Quat}}}
	lanes := func(i int32) []value { return []value{{lanes: [4]int32{i, 10, 20, 30}}} }
	c := ghostCodec{tick: 3, t0: 2, t1: 1}
	b0, b1 := &base{vals: lanes(1)}, &base{vals: lanes(0)}
	var w, data Writer
	now := lanes(1)
	now[0].lanes[1] = 11 // the value moved, its index did not
	c.encode(&w, &data, &ty, now, b0, b1, nil)
	r := NewReader(data.Bytes())
	if got := r.ReadPackedInt(); got != 0 {
		t.Fatalf("the index went as %d against its prediction, want 0 (predicted from b0)", got)
	}
	vals, _, _, _, err := c.decode(NewReader(w.Bytes()), &ty, b0, b1)
	if err != nil || vals[0].lanes != now[0].lanes {
		t.Fatalf("decoded %v, %v; want %v", vals, err, now[0].lanes)
	}
}

// TestReadNumbersLikeUnmarshal: readNumbers fills an array as
// json.Unmarshal does, fast path or not.
func TestReadNumbersLikeUnmarshal(t *testing.T) {
	for _, in := range []string{`[1,2,3]`, `[1.5,-2e3,0]`, `[ 1, 2, 3 ]`, `[1,2]`, `[1,2,3,4]`, `[1,2,3,]`, `["a",1,2]`, `null`, `{}`, `[]`, `[0.001,-0,1E2]`, `[1,2,"x"]`, `[01,2,3]`} {
		sameAsUnmarshal(t, in)
	}
}

func FuzzReadNumbers(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `[0,0.7071068,0,0.7071068]`, `[1,2,3,]`, `[-1e-3,2,3]`} {
		f.Add(s)
	}
	f.Fuzz(sameAsUnmarshal)
}

func sameAsUnmarshal(t *testing.T, in string) {
	{
		for _, n := range []int{3, 4} {
			got := make([]float64, n)
			ok := readNumbers([]byte(in), got)
			want := make([]float64, n)
			var err error
			if n == 3 {
				var a [3]float64
				err = json.Unmarshal([]byte(in), &a)
				copy(want, a[:])
			} else {
				var a [4]float64
				err = json.Unmarshal([]byte(in), &a)
				copy(want, a[:])
			}
			if ok != (err == nil) || !slices.Equal(got, want) {
				t.Errorf("%s into %d: %v %v, json.Unmarshal %v %v", in, n, got, ok, want, err)
			}
		}
	}
}
