package interest

import (
	"math"
	"strconv"
)

// ParseVec3 reads a JSON array of three finite numbers, such as an
// object's position. A node runs it for every change routed while regions
// exist, so it does not go through encoding/json.
func ParseVec3(raw []byte) (p [3]float64, ok bool) {
	i := 0
	skip := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	skip()
	if i >= len(raw) || raw[i] != '[' {
		return p, false
	}
	i++
	for k := range 3 {
		skip()
		j := i
		for j < len(raw) && (raw[j] == '-' || raw[j] == '+' || raw[j] == '.' || raw[j] == 'e' || raw[j] == 'E' || raw[j] >= '0' && raw[j] <= '9') {
			j++
		}
		v, err := strconv.ParseFloat(string(raw[i:j]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return p, false
		}
		p[k], i = v, j
		skip()
		want := byte(',')
		if k == 2 {
			want = ']'
		}
		if i >= len(raw) || raw[i] != want {
			return p, false
		}
		i++
	}
	skip()
	return p, i == len(raw)
}
