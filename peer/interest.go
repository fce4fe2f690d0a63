package peer

import (
	"encoding/json"
	"math"
	"strconv"
)

// Box is an axis-aligned box in world coordinates: an interest region is
// a list of them (the metadata key "interest", our extension).
type Box struct {
	Min, Max [3]float64
}

// Contains reports whether p is inside b grown by margin on every side.
func (b Box) Contains(p [3]float64, margin float64) bool {
	for i := range 3 {
		if p[i] < b.Min[i]-margin || p[i] > b.Max[i]+margin {
			return false
		}
	}
	return true
}

// MaxInterestBoxes bounds the boxes of one interest region.
const MaxInterestBoxes = 64

// decodeInterest decodes the "interest" metadata value: one box, a list of
// boxes, or null (everything). It reports whether a region was given.
func decodeInterest(raw json.RawMessage) ([]Box, bool, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, false, nil
	}
	type wire struct {
		Min []float64 `json:"min"`
		Max []float64 `json:"max"`
	}
	var list []wire
	if raw[0] == '{' {
		var one wire
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, false, invalid("interest is not a box")
		}
		list = []wire{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false, invalid("interest is not a box or a list of boxes")
	}
	if len(list) > MaxInterestBoxes {
		return nil, false, invalid("interest has %d boxes (limit %d)", len(list), MaxInterestBoxes)
	}
	boxes := make([]Box, 0, len(list))
	for _, w := range list {
		if len(w.Min) != 3 || len(w.Max) != 3 {
			return nil, false, invalid("an interest box needs min and max of three numbers")
		}
		b := Box{Min: [3]float64(w.Min), Max: [3]float64(w.Max)}
		for i := range 3 {
			if math.IsNaN(b.Min[i]) || math.IsNaN(b.Max[i]) || b.Min[i] > b.Max[i] {
				return nil, false, invalid("interest box min must not exceed max")
			}
		}
		boxes = append(boxes, b)
	}
	return boxes, true, nil
}

// appendInterest appends ,"interest":[...].
func appendInterest(dst []byte, boxes []Box) []byte {
	dst = append(dst, `,"interest":[`...)
	for i, b := range boxes {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"min":`...)
		dst = appendVec(dst, b.Min)
		dst = append(dst, `,"max":`...)
		dst = appendVec(dst, b.Max)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendVec(dst []byte, v [3]float64) []byte {
	dst = append(dst, '[')
	for i, x := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch {
		case math.IsInf(x, 1):
			x = math.MaxFloat64
		case math.IsInf(x, -1):
			x = -math.MaxFloat64
		}
		dst = strconv.AppendFloat(dst, x, 'g', -1, 64)
	}
	return append(dst, ']')
}
