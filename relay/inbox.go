package relay

import "sync"

// Inbox is a Receiver that queues what the node routes to an attachment,
// for a consumer that takes it on a schedule of its own (a bridge's
// heartbeat or tick). Receive never blocks; Take may be called from any
// goroutine. The zero value is ready to use.
type Inbox struct {
	mu sync.Mutex
	ds []Delivery
}

// Receive implements Receiver.
func (i *Inbox) Receive(ds []Delivery) {
	i.mu.Lock()
	i.ds = append(i.ds, ds...)
	i.mu.Unlock()
}

// Take returns what was received since the last call, in order.
func (i *Inbox) Take() []Delivery {
	i.mu.Lock()
	defer i.mu.Unlock()
	ds := i.ds
	i.ds = nil
	return ds
}
