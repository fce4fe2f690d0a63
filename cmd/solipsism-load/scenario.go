package main

import (
	"flag"
	"fmt"
	"math"
	"strings"
)

// scenarios are presets of flags: a scenario sets those the command line
// leaves alone.
var scenarios = map[string]struct {
	about string
	flags map[string]string
}{
	"crowd": {"every client in one area, each seeing all the others, its object moving about at 5 Hz (run the node with --priority-near and --max-client-bytes to see what priority buys)",
		map[string]string{"rate": "5", "spacing": "2", "interest": "10000", "move": "0.5", "near": "5"}},
	"spread": {"clients spread over a big world, each seeing its neighbourhood (about 25 others), moving at 5 Hz",
		map[string]string{"rate": "5", "spacing": "10", "interest": "25", "move": "2", "near": "15"}},
	"rooms": {"clients in 20 rooms, each seeing its room, at 5 Hz",
		map[string]string{"rate": "5", "rooms": "20"}},
	"mesh": {"spread, over several nodes (--url a,b,...): each serves a block of the grid, as near square as their number allows",
		map[string]string{"rate": "5", "spacing": "10", "interest": "25", "move": "2", "near": "15"}},
}

// applyScenario sets the flags of scenario name that were not given.
func applyScenario(fs *flag.FlagSet, name string) error {
	if name == "" {
		return nil
	}
	sc, ok := scenarios[name]
	if !ok {
		names := make([]string, 0, len(scenarios))
		for n := range scenarios {
			names = append(names, n)
		}
		return fmt.Errorf("--scenario %q: want one of %s", name, strings.Join(names, ", "))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for k, v := range sc.flags {
		if !given[k] {
			if err := fs.Set(k, v); err != nil {
				return fmt.Errorf("scenario %s: --%s %s: %w", name, k, v, err)
			}
		}
	}
	return nil
}

// scenarioHelp lists the scenarios for -h.
func scenarioHelp() string {
	var b strings.Builder
	for _, n := range []string{"crowd", "spread", "rooms", "mesh"} {
		fmt.Fprintf(&b, "\n  %s: %s", n, scenarios[n].about)
	}
	return b.String()
}

// position is where the client's object is at its i-th update: in its
// grid cell with --interest (moving about it with --move), else moving
// along x.
func (cl *client) position(i int) string {
	if cl.box == nil {
		return fmt.Sprintf("[%d,1,2]", i)
	}
	p := cl.placeAt(i)
	return fmt.Sprintf("[%g,%g,%g]", p[0], p[1], p[2])
}

// placeAt is the object's position at its i-th update: around its cell
// on a circle of radius --move, a different phase for each client.
func (cl *client) placeAt(i int) [3]float64 {
	m := cl.cfg.move
	if m <= 0 {
		return cl.at
	}
	a := float64(i)*0.7 + cl.phase
	return [3]float64{cl.at[0] + m*math.Cos(a), cl.at[1], cl.at[2] + m*math.Sin(a)}
}

// distance is how far p is from the client's cell.
func (cl *client) distance(p [3]float64) float64 {
	var s float64
	for k := range 3 {
		s += (p[k] - cl.at[k]) * (p[k] - cl.at[k])
	}
	return math.Sqrt(s)
}
