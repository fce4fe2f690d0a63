package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/solipsism/mesh/metrics"
	"github.com/solipsism/mesh/ownership"
)

type source metrics.Snapshot

func (s source) Snapshot() metrics.Snapshot { return metrics.Snapshot(s) }

// gather registers cs and returns every sample by name and label values.
func gather(t *testing.T, cs ...prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() != "role" {
					key += "," + l.GetValue()
				}
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestCollector(t *testing.T) {
	snap := metrics.Snapshot{Objects: 7, Members: -1, Queued: 3,
		Links:   map[ownership.LinkKind]int{ownership.Downstream: 2, ownership.Mesh: 1},
		Bridged: map[string]int{"snapshot": 4}}
	snap.RecordsIn, snap.MeshOut = 10, 5
	stored := snap
	stored.Members, stored.Stored, stored.StoreWrites, stored.StoreObjects = 2, true, 9, 6
	for _, tc := range []struct {
		name   string
		snap   metrics.Snapshot
		want   map[string]float64
		absent []string
	}{
		{"no mesh, no store", snap, map[string]float64{
			"solipsism_objects": 7, "solipsism_queued_objects": 3, "solipsism_links,downstream": 2,
			"solipsism_bridged_peers,snapshot": 4, "solipsism_change_records_total,in": 10,
			"solipsism_mesh_change_records_total,out": 5,
		}, []string{"solipsism_mesh_members", "solipsism_store_writes_total"}},
		{"a mesh member with a store", stored, map[string]float64{
			"solipsism_mesh_members": 2, "solipsism_store_writes_total": 9, "solipsism_store_objects": 6,
			"solipsism_store_write_failures_total": 0,
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := gather(t, metrics.NewCollector("server", source(tc.snap)))
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s present", k)
				}
			}
		})
	}
}

func TestRecorder(t *testing.T) {
	var none *metrics.Recorder // records nothing, and does not panic
	none.Tick(time.Millisecond)
	none.Limited("schema")

	r := metrics.NewRecorder("proxy")
	got := gather(t, r.Collectors()...)
	for _, k := range []string{"solipsism_limited_total,schema", "solipsism_repairs_total,stale", "solipsism_app_messages_total,dropped"} {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 before any use", k, v, ok)
		}
	}
	r.Limited("schema")
	r.Repaired(metrics.RepairMissing, 3)
	r.Message("relayed")
	r.Tick(time.Millisecond)
	r.Delivered(time.Millisecond)
	r.DigestSince(time.Now())
	got = gather(t, r.Collectors()...)
	for k, v := range map[string]float64{"solipsism_limited_total,schema": 1, "solipsism_repairs_total,missing": 3,
		"solipsism_app_messages_total,relayed": 1, "solipsism_tick_duration_seconds": 1, "solipsism_delivery_latency_seconds": 1} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
