package interest_test

import (
	"fmt"

	"github.com/solipsism/mesh/interest"
	"github.com/solipsism/mesh/peer"
)

// A proxy with 100 clients on a 10 × 10 grid, 10 apart, each seeing 15
// around it, announces one rectangle upstream instead of 100 boxes (more
// than a metadata may name): their union, -15 to 105 on x and z, grown to
// whole 4-unit columns (an eighth of the index's 32-unit cells).
func ExampleCoarsen() {
	var regions []peer.Box
	for i := range 100 {
		x, z := float64(i%10)*10, float64(i/10)*10
		regions = append(regions, peer.Box{Min: [3]float64{x - 15, -2, z - 15}, Max: [3]float64{x + 15, 2, z + 15}})
	}
	for _, b := range interest.Coarsen(regions, peer.MaxInterestBoxes, 32) {
		fmt.Println(b.Min, b.Max)
	}
	// Output: [-16 -2 -16] [108 2 108]
}
