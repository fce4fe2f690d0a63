package main

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"strings"
)

// series is one line of a chart.
type series struct {
	name, color string
	ys          []float64
}

// chart draws series over ts as an inline SVG line chart.
func chart(title, unit string, ts []float64, lines ...series) template.HTML {
	const w, h, left, bottom, top, right = 720, 220, 56, 28, 24, 12
	maxY, maxT := 0.0, 1.0
	for _, t := range ts {
		maxT = math.Max(maxT, t)
	}
	for _, l := range lines {
		for _, y := range l.ys {
			if !math.IsNaN(y) && y > maxY {
				maxY = y
			}
		}
	}
	if maxY <= 0 {
		maxY = 1
	}
	maxY *= 1.1
	x := func(t float64) float64 { return left + (w-left-right)*t/maxT }
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/maxY) }
	var b strings.Builder
	fmt.Fprintf(&b, `<figure><figcaption>%s</figcaption><svg viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		template.HTMLEscapeString(title), w, h, w, h, template.HTMLEscapeString(title))
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="axis" text-anchor="end">%s</text>`,
			left, w-right, y(v), y(v), left-6, y(v)+4, short(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="axis">%s</text><text x="%d" y="%d" class="axis" text-anchor="end">%.0f s</text>`,
		4, top-8, template.HTMLEscapeString(unit), w-right, h-8, maxT)
	for k, l := range lines {
		var pts []string
		for i, v := range l.ys {
			if i < len(ts) && !math.IsNaN(v) && v >= 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ts[i]), y(v)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, l.color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="axis">%s</text>`,
			left+10+k*150, h-18, l.color, left+24+k*150, h-9, template.HTMLEscapeString(l.name))
	}
	b.WriteString(`</svg></figure>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped names
}

// short prints an axis value.
func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

var reportPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>solipsism-load: {{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:780px}
table{border-collapse:collapse}td{padding:2px 12px 2px 0}td:first-child{color:#555}
figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:4px}
.grid{stroke:#ddd}.axis{font-size:11px;fill:#555}pre{background:#f5f5f5;padding:8px;overflow:auto}
</style></head><body>
<h1>solipsism-load: {{.Title}}</h1>
<table>{{range .Rows}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>{{end}}</table>
{{range .Charts}}{{.}}{{end}}
<details><summary>The report as JSON</summary><pre>{{.JSON}}</pre></details>
</body></html>
`))

// writeHTML writes a self-contained report of r to path.
func writeHTML(path, title string, r report) error {
	ts := make([]float64, len(r.Timeline))
	col := func(f func(sample) float64) []float64 {
		out := make([]float64, len(r.Timeline))
		for i, s := range r.Timeline {
			out[i] = f(s)
		}
		return out
	}
	for i, s := range r.Timeline {
		ts[i] = s.T
	}
	lat := []series{{"p50", "#1f77b4", col(func(s sample) float64 { return s.P50ms })}, {"p99", "#d62728", col(func(s sample) float64 { return s.P99ms })}}
	if r.NearP99ms > 0 || r.FarP99ms > 0 {
		lat = append(lat, series{"near p99", "#2ca02c", col(func(s sample) float64 { return s.NearP99ms })},
			series{"far p99", "#9467bd", col(func(s sample) float64 { return s.FarP99ms })})
	}
	charts := []template.HTML{
		chart("Latency, change to delivery (observers)", "ms", ts, lat...),
		chart("Bytes delivered per client per second", "B/s", ts, series{"bytes", "#1f77b4", col(func(s sample) float64 { return s.BytesPerClient })}),
		chart("Records delivered per second (all clients)", "records/s", ts, series{"records", "#ff7f0e", col(func(s sample) float64 { return s.Records })}),
		chart("Node CPU (cores, summed over the nodes)", "cores", ts, series{"CPU", "#d62728", col(func(s sample) float64 { return s.CPU })}),
		chart("Node RSS (MiB, summed over the nodes)", "MiB", ts, series{"RSS", "#8c564b", col(func(s sample) float64 { return s.RSSMiB })}),
		chart("Repairs since the start (anti-entropy; should stay 0)", "objects", ts, series{"repairs", "#7f7f7f", col(func(s sample) float64 { return s.Repairs })}),
	}
	rows := [][2]string{
		{"clients", fmt.Sprint(r.Clients)},
		{"measured", fmt.Sprintf("%.1f s", r.Seconds)},
		{"updates sent", fmt.Sprintf("%.0f /s", float64(r.Sent)/math.Max(r.Seconds, 1e-9))},
		{"records delivered", fmt.Sprintf("%.0f /s", r.DeliveredPerS)},
		{"bytes per client", fmt.Sprintf("%.0f B/s", r.BytesPerClientPerS)},
		{"latency p50 / p99 / max", fmt.Sprintf("%.1f / %.1f / %.1f ms", r.P50ms, r.P99ms, r.MaxMs)},
	}
	if r.NearP99ms > 0 || r.FarP99ms > 0 {
		rows = append(rows, [2]string{"near p99; far p99 / max", fmt.Sprintf("%.1f ms; %.1f / %.1f ms", r.NearP99ms, r.FarP99ms, r.FarMaxMs)},
			[2]string{"far staleness p99 / max", fmt.Sprintf("%.1f / %.1f ms", r.FarStaleP99ms, r.FarStaleMaxMs)},
			[2]string{"far behind p99 / max", fmt.Sprintf("%.1f / %.1f ms", r.FarBehindP99ms, r.FarBehindMaxMs)})
	}
	if r.NodeCPUCores > 0 {
		rows = append(rows, [2]string{"node CPU", fmt.Sprintf("%.2f cores, %.2f ms per client-second, %.1f µs per record", r.NodeCPUCores, r.NodeCPUPerClientMs, r.NodeCPUPerRecordUs)},
			[2]string{"node RSS (peak)", fmt.Sprintf("%.0f MiB", r.NodeRSSMiB)})
	}
	rows = append(rows, [2]string{"repairs", fmt.Sprint(r.Repairs)}, [2]string{"errors; reconnects", fmt.Sprintf("%d; %d", r.Errors, r.Reconnects)})
	if r.Checked > 0 {
		rows = append(rows, [2]string{"consistency", fmt.Sprintf("%d of %d clients hold their node's world", r.Checked-r.Inconsistent, r.Checked)})
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := reportPage.Execute(f, map[string]any{"Title": title, "Rows": rows, "Charts": charts, "JSON": string(js)}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
