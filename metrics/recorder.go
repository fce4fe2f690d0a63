package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Repair kinds, as solipsism_repairs_total labels them.
const (
	RepairMissing = "missing"
	RepairStale   = "stale"
	RepairExtra   = "extra"
)

// Limits, as solipsism_limited_total labels them: each present at zero so
// that a dashboard sees a limit before its first use.
var Limits = []string{"connections_per_ip", "objects_per_owner", "object_size", "unauthorized", "identity_taken", "upstream_refused", "world_objects", "world_bytes", "schema"}

// Recorder holds the instruments a node observes as it works.
type Recorder struct {
	tick     prometheus.Histogram
	delivery prometheus.Histogram
	limited  *prometheus.CounterVec
	repairs  *prometheus.CounterVec
	// digest is the time spent on anti-entropy: digests made and
	// checked, repairs answered. Its rate against the process's CPU is
	// what anti-entropy costs.
	digest   prometheus.Counter
	messages *prometheus.CounterVec
}

// NewRecorder makes the instruments of a node of role (a constant label).
func NewRecorder(role string) *Recorder {
	labels := prometheus.Labels{"role": role}
	r := &Recorder{
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
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "solipsism_limited_total", ConstLabels: labels,
			Help: "Peers' actions stopped by a limit: connections_per_ip, objects_per_owner, object_size (properties or bytes), unauthorized, identity_taken, schema (a write that breaks the property schemas).",
		}, []string{"limit"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "solipsism_repairs_total", ConstLabels: labels,
			Help: "Objects anti-entropy repaired, by kind: missing (a peer had not sent one it should have), stale (our copy differed), extra (we held one the peer no longer has). Zero in a healthy deployment.",
		}, []string{"kind"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "solipsism_app_messages_total", ConstLabels: labels,
			Help: "Ephemeral messages by outcome: relayed (taken from a peer or published here), refused (a sender the peer's link does not hold), dropped (once per peer too slow to take it).",
		}, []string{"outcome"}),
		digest: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "solipsism_digest_seconds_total", ConstLabels: labels,
			Help: "Time spent on anti-entropy: making and checking digests, answering repairs (all of it CPU: passes over the world under the node's lock).",
		}),
	}
	for _, l := range Limits {
		r.limited.WithLabelValues(l)
	}
	for _, k := range []string{RepairMissing, RepairStale, RepairExtra} {
		r.repairs.WithLabelValues(k)
	}
	for _, o := range []string{"relayed", "refused", "dropped"} {
		r.messages.WithLabelValues(o)
	}
	return r
}

// Collectors are the Recorder's instruments, to register.
func (r *Recorder) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.tick, r.delivery, r.limited, r.repairs, r.digest, r.messages}
}

// Tick observes the time one flush took.
func (r *Recorder) Tick(d time.Duration) {
	if r != nil {
		r.tick.Observe(d.Seconds())
	}
}

// Delivered observes, per message written, the age of its oldest record.
func (r *Recorder) Delivered(age time.Duration) {
	if r != nil {
		r.delivery.Observe(age.Seconds())
	}
}

// Limited counts an action stopped by a limit.
func (r *Recorder) Limited(limit string) {
	if r != nil {
		r.limited.WithLabelValues(limit).Inc()
	}
}

// Repaired counts objects repaired, by kind.
func (r *Recorder) Repaired(kind string, n int) {
	if r != nil {
		r.repairs.WithLabelValues(kind).Add(float64(n))
	}
}

// DigestSince adds the time since t0 to the anti-entropy time.
func (r *Recorder) DigestSince(t0 time.Time) {
	if r != nil {
		r.digest.Add(time.Since(t0).Seconds())
	}
}

// Message counts an ephemeral message by outcome.
func (r *Recorder) Message(outcome string) {
	if r != nil {
		r.messages.WithLabelValues(outcome).Inc()
	}
}
