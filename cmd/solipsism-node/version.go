package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo describes this binary: its module version and the commit it
// was built from, as the Go toolchain recorded them.
type buildInfo struct {
	version, revision, modified, goVersion string
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: "(devel)", revision: "unknown", goVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := info.Main.Version; v != "" {
		b.version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			b.modified = s.Value
		}
	}
	return b
}

func (b buildInfo) String() string {
	rev := b.revision
	if b.modified == "true" {
		rev += " (modified)"
	}
	return fmt.Sprintf("solipsism-node %s, commit %s, %s", b.version, rev, b.goVersion)
}

func printVersion(w io.Writer) {
	fmt.Fprintln(w, readBuildInfo())
}

// buildInfoMetric is solipsism_build_info: 1, labelled with what this
// binary is, so that dashboards can tell versions apart.
func buildInfoMetric() prometheus.Collector {
	b := readBuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "solipsism_build_info",
		Help:        "Always 1; its labels say which build this node runs.",
		ConstLabels: prometheus.Labels{"version": b.version, "revision": b.revision, "goversion": b.goVersion},
	})
	g.Set(1)
	return g
}
