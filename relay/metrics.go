package relay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// closedTotals keeps the counters of links that have closed, so that the
// exported counters never go backwards. Guarded by Node.mu.
type closedTotals struct {
	msgsIn, msgsOut                   [peer.NumKinds]uint64
	recIn, recOut, bytesIn, bytesOut  uint64
	refused, ignored, coalesced, drop uint64
	meshIn, meshOut                   uint64
}

func (t *closedTotals) add(l *peer.Link) {
	s := l.Stats()
	for k := range t.msgsIn {
		t.msgsIn[k] += s.MessagesIn[k].Load()
		t.msgsOut[k] += s.MessagesOut[k].Load()
	}
	t.recIn += s.RecordsIn.Load()
	t.recOut += s.RecordsOut.Load()
	t.bytesIn += s.BytesIn.Load()
	t.bytesOut += s.BytesOut.Load()
	t.refused += s.Refused.Load()
	t.ignored += s.Ignored.Load()
	c, d := l.Counters()
	t.coalesced += c
	t.drop += d
	if l.Kind() == ownership.Mesh {
		t.meshIn += s.RecordsIn.Load()
		t.meshOut += s.RecordsOut.Load()
	}
}

// nodeMetrics are the histograms a node observes as it works.
type nodeMetrics struct {
	tick     prometheus.Histogram
	delivery prometheus.Histogram
	limited  *prometheus.CounterVec
	repairs  *prometheus.CounterVec
	// digest is the time spent on anti-entropy: digests made and
	// checked, repairs answered. Its rate against the process's CPU is
	// what anti-entropy costs.
	digest prometheus.Counter
	// messages counts ephemeral messages by outcome (messages.go).
	messages *prometheus.CounterVec
}

func newNodeMetrics(role string) *nodeMetrics {
	labels := prometheus.Labels{"role": role}
	return &nodeMetrics{
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "solipsism_tick_duration_seconds", ConstLabels: labels,
			Help:    "Time to offer one tick's changes (and pending refresh answers) to every link.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 12), // 10µs … ~600ms
		}),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "solipsism_delivery_latency_seconds", ConstLabels: labels,
			Help:    "Per message written, the age of its oldest change record: from when the change took effect on this node until it was written to a peer.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16), // 100µs … ~3.3s
		}),
		limited:  limitedCounter(labels),
		repairs:  repairsCounter(labels),
		messages: messagesCounter(labels),
		digest: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "solipsism_digest_seconds_total", ConstLabels: labels,
			Help: "Time spent on anti-entropy: making and checking digests, answering repairs (all of it CPU: passes over the world under the node's lock).",
		}),
	}
}

// digestTime adds the time since t0 to solipsism_digest_seconds_total.
func (n *Node) digestTime(t0 time.Time) {
	if n.life.metrics != nil {
		n.life.metrics.digest.Add(time.Since(t0).Seconds())
	}
}

// repairsCounter is solipsism_repairs_total with every kind present at zero.
func repairsCounter(labels prometheus.Labels) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "solipsism_repairs_total", ConstLabels: labels,
		Help: "Objects anti-entropy repaired, by kind: missing (a peer had not sent one it should have), stale (our copy differed), extra (we held one the peer no longer has). Zero in a healthy deployment.",
	}, []string{"kind"})
	for _, k := range repairKinds {
		c.WithLabelValues(k)
	}
	return c
}

// limitedCounter is solipsism_limited_total with every limit present at
// zero, so that a dashboard sees a limit before its first use.
func limitedCounter(labels prometheus.Labels) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "solipsism_limited_total", ConstLabels: labels,
		Help: "Peers' actions stopped by a limit: connections_per_ip, objects_per_owner, object_size (properties or bytes), unauthorized, identity_taken, schema (a write that breaks the property schemas).",
	}, []string{"limit"})
	for _, l := range []string{"connections_per_ip", "objects_per_owner", "object_size", "unauthorized", "identity_taken", "upstream_refused", "world_objects", "world_bytes", "schema"} {
		c.WithLabelValues(l)
	}
	return c
}

// limited counts an action stopped by a limit.
func (n *Node) limited(limit string) {
	if n.life.metrics != nil {
		n.life.metrics.limited.WithLabelValues(limit).Inc()
	}
}

// collector exports a node's counters. The hot path only bumps per-link
// atomics; the sums are made here, at scrape time.
type collector struct {
	n                                            *Node
	links, objects, messages, records, bytes     *prometheus.Desc
	refused, ignored, coalesced, dropped, queued *prometheus.Desc
	members, meshRecords                         *prometheus.Desc
	storeWrites, storeFailures, storeObjects     *prometheus.Desc
	bridged                                      *prometheus.Desc
}

func newCollector(n *Node) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("solipsism_"+name, help, labels, prometheus.Labels{"role": n.role.String()})
	}
	return &collector{
		n:             n,
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

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.links, c.objects, c.messages, c.records, c.bytes, c.refused, c.ignored, c.coalesced, c.dropped, c.queued, c.members, c.meshRecords, c.storeWrites, c.storeFailures, c.storeObjects, c.bridged} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	n.mu.Lock()
	t := n.hub.totals
	byKind := map[ownership.LinkKind]int{ownership.Downstream: 0, ownership.Upstream: 0, ownership.Mesh: 0}
	queued := 0
	for _, ls := range n.hub.order {
		byKind[ls.kind]++
		t.add(ls.link)
		queued += ls.link.Queued()
	}
	m := n.hub.mesh
	ps, stored := n.life.persistStats, 0
	if n.life.persist != nil {
		stored = len(n.life.persist.stored)
	}
	n.mu.Unlock()
	if ps != nil {
		ps.collect(ch, c.storeWrites, c.storeFailures, c.storeObjects, stored)
	}
	for kind, count := range n.bridgedCounts() {
		ch <- prometheus.MustNewConstMetric(c.bridged, prometheus.GaugeValue, float64(count), kind)
	}
	if m != nil {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(len(m.Status().Members)))
	}
	ch <- prometheus.MustNewConstMetric(c.meshRecords, prometheus.CounterValue, float64(t.meshIn), "in")
	ch <- prometheus.MustNewConstMetric(c.meshRecords, prometheus.CounterValue, float64(t.meshOut), "out")
	for k, v := range byKind {
		ch <- prometheus.MustNewConstMetric(c.links, prometheus.GaugeValue, float64(v), k.String())
	}
	ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(n.world.Len()))
	for k := peer.MessageKind(0); k < peer.NumKinds; k++ {
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(t.msgsIn[k]), "in", k.String())
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(t.msgsOut[k]), "out", k.String())
	}
	ch <- prometheus.MustNewConstMetric(c.records, prometheus.CounterValue, float64(t.recIn), "in")
	ch <- prometheus.MustNewConstMetric(c.records, prometheus.CounterValue, float64(t.recOut), "out")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(t.bytesIn), "in")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(t.bytesOut), "out")
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(t.refused))
	ch <- prometheus.MustNewConstMetric(c.ignored, prometheus.CounterValue, float64(t.ignored))
	ch <- prometheus.MustNewConstMetric(c.coalesced, prometheus.CounterValue, float64(t.coalesced))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(t.drop))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(queued))
}
