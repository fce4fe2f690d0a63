package relay

import (
	"sync"

	"github.com/solipsism/mesh/internal/loop"
)

// Inbox is a Receiver that queues what the node routes to an attachment,
// for a consumer that takes it on a schedule of its own (a bridge's
// heartbeat or tick). Receive never blocks; Take may be called from any
// goroutine. The zero value is ready to use.
type Inbox struct {
	// Wake, if not nil, is woken (a send that does not wait) by every
	// Receive: a consumer that sleeps while it has nothing to do
	// (loop.EveryWhileBusy) must still take what comes after it fell
	// asleep, such as the removes of a world it stopped wanting. Set it
	// before the inbox is used.
	Wake chan struct{}

	mu sync.Mutex
	ds []Delivery
}

// Receive implements Receiver.
func (i *Inbox) Receive(ds []Delivery) {
	i.mu.Lock()
	i.ds = append(i.ds, ds...)
	i.mu.Unlock()
	if i.Wake != nil {
		loop.Wake(i.Wake)
	}
}

// Take returns what was received since the last call, in order.
func (i *Inbox) Take() []Delivery {
	i.mu.Lock()
	defer i.mu.Unlock()
	ds := i.ds
	i.ds = nil
	return ds
}

// Len returns how many deliveries wait to be taken.
func (i *Inbox) Len() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.ds)
}
