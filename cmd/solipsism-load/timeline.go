package main

import (
	"bufio"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one second of a run, as the report plots it.
type sample struct {
	T float64 `json:"t"` // seconds since measuring began
	// P50ms and P99ms are the latencies the observers saw this second;
	// NearP99ms and FarP99ms those of near and far objects (--near).
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	NearP99ms float64 `json:"near_p99_ms,omitempty"`
	FarP99ms  float64 `json:"far_p99_ms,omitempty"`
	// Records and BytesPerClient are what the clients were delivered
	// this second.
	Records        float64 `json:"records_per_s"`
	BytesPerClient float64 `json:"bytes_per_client_per_s"`
	// CPU is the nodes' CPU this second (cores, summed over the nodes),
	// RSSMiB their resident memory, Repairs their repairs so far; -1 if
	// no node answered /metrics.
	CPU     float64 `json:"node_cpu_cores"`
	RSSMiB  float64 `json:"node_rss_mib"`
	Repairs float64 `json:"node_repairs"`
}

// nodeSample is what the nodes' /metrics say now, summed over them.
type nodeSample struct {
	ok                  bool
	cpu, rss, repairs   float64
	delivered, recordIn float64
}

// metricsURL is the /metrics address of a node's ws:// URL.
func metricsURL(ws string) string {
	u := strings.Replace(strings.Replace(ws, "wss://", "https://", 1), "ws://", "http://", 1)
	return strings.TrimSuffix(u, "/ws") + "/metrics"
}

// metricsClient gives up on a node that does not answer within a second,
// so that a stuck node does not stop the timeline.
var metricsClient = &http.Client{Timeout: time.Second}

// readNodes reads every node's /metrics (those that do not answer are
// left out).
func readNodes(urls []string) nodeSample {
	var s nodeSample
	for _, u := range urls {
		resp, err := metricsClient.Get(metricsURL(u))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			name, val, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				continue
			}
			base, _, _ := strings.Cut(name, "{")
			switch base {
			case "process_cpu_seconds_total":
				s.cpu += v
			case "process_resident_memory_bytes":
				s.rss += v
			case "solipsism_repairs_total":
				s.repairs += v
			}
		}
		resp.Body.Close()
		s.ok = true
	}
	return s
}

// timeline samples a run every second while it is measured.
type timeline struct {
	mu      sync.Mutex
	samples []sample
	first   nodeSample
	last    nodeSample
	stop    chan struct{}
	done    chan struct{}
}

// startTimeline samples st, and the nodes at urls, every second.
func startTimeline(st *stats, urls []string, clients int) *timeline {
	tl := &timeline{stop: make(chan struct{}), done: make(chan struct{})}
	tl.first = readNodes(urls)
	tl.last = tl.first
	go func() {
		defer close(tl.done)
		start, prevT := time.Now(), time.Now()
		prevDel, prevBytes := st.delivered.Load(), st.bytes.Load()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-tl.stop:
				return
			case <-t.C:
			}
			now := time.Now()
			dt := now.Sub(prevT).Seconds()
			del, b := st.delivered.Load(), st.bytes.Load()
			all, near, far := st.takeWindow()
			ns := readNodes(urls)
			s := sample{T: now.Sub(start).Seconds(), P50ms: pctMs(all, 0.5), P99ms: pctMs(all, 0.99),
				NearP99ms: pctMs(near, 0.99), FarP99ms: pctMs(far, 0.99),
				Records: float64(del-prevDel) / dt, BytesPerClient: float64(b-prevBytes) / dt / float64(max(clients, 1)),
				CPU: -1, RSSMiB: -1, Repairs: -1}
			tl.mu.Lock()
			if ns.ok && tl.last.ok {
				s.CPU, s.RSSMiB, s.Repairs = (ns.cpu-tl.last.cpu)/dt, ns.rss/(1<<20), ns.repairs-tl.first.repairs
				tl.last = ns
			}
			tl.samples = append(tl.samples, s)
			tl.mu.Unlock()
			prevT, prevDel, prevBytes = now, del, b
		}
	}()
	return tl
}

// end stops sampling and returns the samples.
func (tl *timeline) end() []sample {
	close(tl.stop)
	<-tl.done
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.samples
}

// pctMs is the p-th percentile of lat, in ms (0 if empty); it sorts lat.
func pctMs(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return float64(lat[int(p*float64(len(lat)-1))]) / 1e6
}

// fillNodes adds to r what the observers saw by distance and what the
// nodes spent over the window.
func fillNodes(r *report, st *stats, tl *timeline, samples []sample, secs float64) {
	r.Timeline = samples
	r.BytesPerClientPerS = r.BytesPerS / float64(max(r.Clients, 1))
	p := st.percentiles(&st.near)
	r.NearP99ms = p.p99
	p = st.percentiles(&st.far)
	r.FarP99ms, r.FarMaxMs = p.p99, p.max
	p = st.percentiles(&st.farStale)
	r.FarStaleP99ms, r.FarStaleMaxMs = p.p99, p.max
	p = st.percentiles(&st.farBehind)
	r.FarBehindP99ms, r.FarBehindMaxMs = p.p99, p.max
	tl.mu.Lock()
	first, last := tl.first, tl.last
	tl.mu.Unlock()
	if !first.ok || !last.ok {
		return
	}
	cpu := last.cpu - first.cpu
	r.NodeCPUCores = cpu / secs
	r.NodeCPUPerClientMs = 1000 * cpu / secs / float64(max(r.Clients, 1))
	if r.Delivered > 0 {
		r.NodeCPUPerRecordUs = 1e6 * cpu / float64(r.Delivered)
	}
	r.Repairs = last.repairs - first.repairs
	for _, s := range samples {
		r.NodeRSSMiB = max(r.NodeRSSMiB, s.RSSMiB)
	}
}
