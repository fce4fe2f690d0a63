package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// Totals sums the counters of links: those that closed (so that the
// exported counters never go backwards) and, at a scrape, the open ones.
type Totals struct {
	MessagesIn, MessagesOut              [peer.NumKinds]uint64
	RecordsIn, RecordsOut                uint64
	BytesIn, BytesOut                    uint64
	Refused, Ignored, Coalesced, Dropped uint64
	MeshIn, MeshOut                      uint64
}

// Add adds l's counters.
func (t *Totals) Add(l *peer.Link) {
	s := l.Stats()
	for k := range t.MessagesIn {
		t.MessagesIn[k] += s.MessagesIn[k].Load()
		t.MessagesOut[k] += s.MessagesOut[k].Load()
	}
	t.RecordsIn += s.RecordsIn.Load()
	t.RecordsOut += s.RecordsOut.Load()
	t.BytesIn += s.BytesIn.Load()
	t.BytesOut += s.BytesOut.Load()
	t.Refused += s.Refused.Load()
	t.Ignored += s.Ignored.Load()
	c, d := l.Counters()
	t.Coalesced += c
	t.Dropped += d
	if l.Kind() == ownership.Mesh {
		t.MeshIn += s.RecordsIn.Load()
		t.MeshOut += s.RecordsOut.Load()
	}
}

// Snapshot is what a node counts, read at a scrape.
type Snapshot struct {
	Totals
	// Links counts open links by kind; Queued the objects waiting in
	// their queues.
	Links  map[ownership.LinkKind]int
	Queued int
	// Objects is the size of the world.
	Objects int
	// Members is the count of other live mesh members; -1 off a mesh.
	Members int
	// Bridged counts the bridges' peers by kind.
	Bridged map[string]int
	// StoreWrites, StoreFailures and StoreObjects describe the store;
	// Stored is false without one.
	Stored                     bool
	StoreWrites, StoreFailures uint64
	StoreObjects               int
}

// Source is what a Collector reads: a node. Snapshot is called from the
// scraping goroutine and must be safe for concurrent use.
type Source interface {
	Snapshot() Snapshot
}

// Collector exports a Source's counters. The hot path only bumps per-link
// atomics; the sums are made here, at scrape time.
type Collector struct {
	src                                          Source
	links, objects, messages, records, bytes     *prometheus.Desc
	refused, ignored, coalesced, dropped, queued *prometheus.Desc
	members, meshRecords                         *prometheus.Desc
	storeWrites, storeFailures, storeObjects     *prometheus.Desc
	bridged                                      *prometheus.Desc
}

// NewCollector exports src's counters, labelled with role.
func NewCollector(role string, src Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("solipsism_"+name, help, labels, prometheus.Labels{"role": role})
	}
	return &Collector{
		src:           src,
		links:         d("links", "Open links by kind.", "kind"),
		objects:       d("objects", "Objects in the node's world."),
		messages:      d("messages_total", "Messages by direction and type.", "direction", "type"),
		records:       d("change_records_total", "Change records by direction.", "direction"),
		bytes:         d("bytes_total", "Message bytes by direction.", "direction"),
		refused:       d("refused_writes_total", "Change records refused by ownership rules."),
		ignored:       d("ignored_records_total", "Change records ignored (update or remove of an unknown id)."),
		coalesced:     d("coalesced_records_total", "Outbound records merged into a pending record for the same object."),
		dropped:       d("dropped_records_total", "Outbound records not sent because the peer could not need them."),
		queued:        d("queued_objects", "Objects with changes waiting in link queues."),
		members:       d("mesh_members", "Other live members of the mesh, as memberlist sees them."),
		meshRecords:   d("mesh_change_records_total", "Change records exchanged with other mesh nodes, by direction.", "direction"),
		storeWrites:   d("store_writes_total", "Transactions written to the store (about one per tick with durable changes)."),
		storeFailures: d("store_write_failures_total", "Store writes that failed (a full disk, say); each is retried, and relaying goes on."),
		storeObjects:  d("store_objects", "Durable objects the store holds."),
		bridged:       d("bridged_peers", "Peers the bridges serve, by kind: alloverse-websocket, alloverse-enet, snapshot.", "kind"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.links, c.objects, c.messages, c.records, c.bytes, c.refused, c.ignored, c.coalesced, c.dropped, c.queued, c.members, c.meshRecords, c.storeWrites, c.storeFailures, c.storeObjects, c.bridged} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Snapshot()
	t := s.Totals
	metric := func(d *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, vt, v, labels...)
	}
	if s.Stored {
		metric(c.storeWrites, prometheus.CounterValue, float64(s.StoreWrites))
		metric(c.storeFailures, prometheus.CounterValue, float64(s.StoreFailures))
		metric(c.storeObjects, prometheus.GaugeValue, float64(s.StoreObjects))
	}
	for kind, count := range s.Bridged {
		metric(c.bridged, prometheus.GaugeValue, float64(count), kind)
	}
	if s.Members >= 0 {
		metric(c.members, prometheus.GaugeValue, float64(s.Members))
	}
	metric(c.meshRecords, prometheus.CounterValue, float64(t.MeshIn), "in")
	metric(c.meshRecords, prometheus.CounterValue, float64(t.MeshOut), "out")
	for k, v := range s.Links {
		metric(c.links, prometheus.GaugeValue, float64(v), k.String())
	}
	metric(c.objects, prometheus.GaugeValue, float64(s.Objects))
	for k := peer.MessageKind(0); k < peer.NumKinds; k++ {
		metric(c.messages, prometheus.CounterValue, float64(t.MessagesIn[k]), "in", k.String())
		metric(c.messages, prometheus.CounterValue, float64(t.MessagesOut[k]), "out", k.String())
	}
	metric(c.records, prometheus.CounterValue, float64(t.RecordsIn), "in")
	metric(c.records, prometheus.CounterValue, float64(t.RecordsOut), "out")
	metric(c.bytes, prometheus.CounterValue, float64(t.BytesIn), "in")
	metric(c.bytes, prometheus.CounterValue, float64(t.BytesOut), "out")
	metric(c.refused, prometheus.CounterValue, float64(t.Refused))
	metric(c.ignored, prometheus.CounterValue, float64(t.Ignored))
	metric(c.coalesced, prometheus.CounterValue, float64(t.Coalesced))
	metric(c.dropped, prometheus.CounterValue, float64(t.Dropped))
	metric(c.queued, prometheus.GaugeValue, float64(s.Queued))
}
