package transfer_test

import (
	"fmt"

	"github.com/solipsism/mesh/transfer"
)

// A proxy passes its clients' requests for one object up one at a time:
// the second waits until the upstream has answered the first.
func ExampleRequests() {
	var r transfer.Requests[string]
	never := func(string) bool { return false }
	if r.Add("door", "alice", never) {
		asker, _ := r.Send("door")
		fmt.Println("sent for", asker)
	}
	fmt.Println("bob's request goes now:", r.Add("door", "bob", never))
	asker, _ := r.Answered("door")
	fmt.Println("answered", asker)
	next, _ := r.Send("door")
	fmt.Println("sent for", next)
	// Output:
	// sent for alice
	// bob's request goes now: false
	// answered alice
	// sent for bob
}
