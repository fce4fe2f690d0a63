package test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/peer"
)

// BenchmarkDigestAtScale: what anti-entropy costs a node process holding
// 100,000 objects with 1,000 links to peers that speak it (Go clients, each
// seeing its part of the world through an interest box and moving its
// own object at 5 Hz: a sharded big world). Digests run at the default
// 30 s interval, which at this scale asks for more than the node's budget
// (each digest, sent or checked, passes over the whole world), so the
// budget is what is measured.
//
// Two node processes take turns under the same load, one with digests and
// one without (--digest-interval 0; Go clients then send none either,
// since a node that does not list "digest" is sent none). Reported, as
// medians over the rounds: the node's CPU with and without digests (ms of
// CPU per second), the time the node itself accounts to anti-entropy
// (solipsism_digest_seconds_total) as a share of its CPU, and the on/off
// ratio. The target is at most 2% of the relay's CPU.
//
//	go test ./test -run '^$' -bench DigestAtScale -benchtime 1x -timeout 30m
func BenchmarkDigestAtScale(b *testing.B) {
	const (
		objects = 100_000
		links   = 1000
		window  = 30 * time.Second
	)
	type round struct{ cpu, digest float64 }
	run := func(digests bool) round {
		interval := "30s"
		if !digests {
			interval = "0"
		}
		r := startNodeProc(b, "--tick", "50ms", "--max-conns-per-ip", "-1", "--max-objects-per-owner", "-1",
			"--max-records-per-sec", "-1", "--max-msgs-per-sec", "-1", "--digest-interval", interval)
		fillGrid(b, r.url(), objects)
		stop := make(chan struct{})
		clients := dialMovers(b, r.url(), links, stop)
		defer func() {
			close(stop)
			for _, c := range clients {
				c.Close()
			}
			r.node.Stop(b) // the next round has the cores to itself
		}()
		time.Sleep(5 * time.Second) // warm-up: every client's first view sent
		cpu0, _ := procUsage(b, r.pid)
		_, m0 := httpGet(b, "http://"+r.addr+"/metrics")
		time.Sleep(window)
		cpu1, rss := procUsage(b, r.pid)
		_, m1 := httpGet(b, "http://"+r.addr+"/metrics")
		digest := metricValue(m1, `solipsism_digest_seconds_total{role="server"}`) - metricValue(m0, `solipsism_digest_seconds_total{role="server"}`)
		digestsOut := metricValue(m1, `solipsism_messages_total{direction="out",role="server",type="digest"}`) - metricValue(m0, `solipsism_messages_total{direction="out",role="server",type="digest"}`)
		repairs := 0.0
		for _, k := range []string{"missing", "stale", "extra"} {
			repairs += metricValue(m1, fmt.Sprintf(`solipsism_repairs_total{kind=%q,role="server"}`, k))
		}
		if repairs > 0 {
			b.Errorf("%v repairs", repairs)
		}
		cpu := (cpu1 - cpu0).Seconds() / window.Seconds()
		b.Logf("digests %v: node CPU %.1f ms/s, anti-entropy %.2f ms/s, %.0f digest messages out in %v, RSS %d MiB",
			digests, 1000*cpu, 1000*digest/window.Seconds(), digestsOut, window, rss>>20)
		return round{cpu: cpu, digest: digest / window.Seconds()}
	}
	for range b.N {
		var on, off, share, ratio []float64
		for range benchRounds() {
			a := run(true)
			z := run(false)
			on = append(on, 1000*a.cpu)
			off = append(off, 1000*z.cpu)
			share = append(share, 100*a.digest/a.cpu)
			ratio = append(ratio, a.cpu/z.cpu)
		}
		b.ReportMetric(median(on), "cpu-ms/s-digests")
		b.ReportMetric(median(off), "cpu-ms/s-without")
		b.ReportMetric(median(share), "%cpu-antientropy")
		b.ReportMetric(median(ratio), "on/off")
	}
}

// fillGrid adds n objects owned by one raw client, 3 apart on a square
// grid in x and z, in messages of 1,000, and keeps that client connected
// (reading and discarding) until the benchmark ends.
func fillGrid(tb testing.TB, url string, n int) {
	tb.Helper()
	c := floodClient(tb, url, "fill-00000000-00000000")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	side := gridSide(n)
	for start := 0; start < n; start += 1000 {
		var sb strings.Builder
		sb.WriteString(`["worldChange",{"timestamp":1,"changes":[`)
		for i := start; i < min(n, start+1000); i++ {
			if i > start {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"type":"add","id":"grid-%d","owner":"fill-00000000-00000000","properties":{"position":[%d,0,%d],"color":"grey"}}`, i, 3*(i%side), 3*(i/side))
		}
		sb.WriteString(`]}]`)
		if err := c.Write(ctx, websocket.MessageText, []byte(sb.String())); err != nil {
			tb.Fatal(err)
		}
	}
}

// dialMovers connects n Go clients spread over the grid of fillGrid, each
// with an interest box of 30 × 30 (about 100 grid objects) around its own
// object, which it moves at 5 Hz until stop is closed.
func dialMovers(tb testing.TB, url string, n int, stop <-chan struct{}) []*client.Client {
	tb.Helper()
	clients := make([]*client.Client, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	span := 3 * float64(gridSide(100_000))
	per := gridSide(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := (float64(i%per) + 0.5) * span / float64(per)
			z := (float64(i/per) + 0.5) * span / float64(per)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, url, client.Options{
				Identifier: fmt.Sprintf("mover-%08d-%08d", i, i),
				Interest:   []peer.Box{{Min: [3]float64{x - 15, -5, z - 15}, Max: [3]float64{x + 15, 5, z + 15}}},
				Logger:     slog.New(slog.DiscardHandler),
			})
			if err != nil {
				errs <- err
				return
			}
			clients[i] = c
			id := fmt.Sprintf("mover-%d", i)
			if err := c.CreateWithID(id, map[string]any{"position": []float64{x, 1, z}}); err != nil {
				errs <- err
				return
			}
			go func() {
				t := time.NewTicker(200 * time.Millisecond)
				defer t.Stop()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					case <-t.C:
					}
					if c.Set(id, map[string]any{"position": []float64{x + float64(k%10), 1, z}}) != nil {
						return
					}
				}
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return clients
}
