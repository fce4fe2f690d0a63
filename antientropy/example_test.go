package antientropy_test

import (
	"fmt"
	"time"

	"github.com/solipsism/mesh/antientropy"
)

// A link compares each digest of its peer with its own; a bucket that
// differs twice in a row is asked for.
func ExampleLink() {
	var l antientropy.Link
	now := time.Now()
	mine := []uint64{1, 2, 3, 4}
	fmt.Println(l.Compare(mine, []uint64{1, 2, 9, 4})) // in flight, perhaps
	fmt.Println(l.Compare(mine, []uint64{1, 2, 9, 4})) // still
	r, ok := l.Ask(now, 30*time.Second, len(mine), []int{2})
	fmt.Println(r.Of, r.Buckets, ok)
	// Output:
	// []
	// [2]
	// 4 [2] true
}
