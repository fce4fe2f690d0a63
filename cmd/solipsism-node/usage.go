package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// flagGroups orders -h by concern; every flag belongs to one (a test
// checks), in the order given.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Serving", []string{"listen", "role", "prefix", "tick", "origin", "data-dir"}},
	{"Proxies and sharding", []string{"upstream", "upstream-token", "upstream-token-file", "backoff-min", "backoff-max", "interest", "reclaim-grace", "digest-interval"}},
	{"Mesh", []string{"mesh-bind", "join", "mesh-secret", "mesh-secret-file", "mesh-label", "mesh-profile", "advertise-url"}},
	{"Security", []string{"auth-key", "auth-key-file", "token-url", "tls-cert", "tls-key", "tls-ca", "transfers"}},
	{"Limits", []string{"read-limit", "read-rate", "stall-timeout", "ping-interval", "max-conns-per-ip", "max-msgs-per-sec", "max-records-per-sec",
		"max-objects-per-owner", "max-props-per-object", "max-value-bytes", "max-object-bytes", "max-scope-elements", "max-scope-bytes", "max-world-objects", "max-world-bytes", "schemas"}},
	{"Crowds", []string{"priority-near", "priority-bands", "max-client-bytes"}},
	{"Bridges", []string{"alloverse-enet", "allo-heartbeat", "allo-history", "allo-patch-style", "allo-view-radius", "place-name", "snapshot-listen", "snapshot-rate", "snapshot-max-kbps"}},
	{"Pages", []string{"ice-servers"}},
	{"Operations", []string{"log-level", "log-format", "debug-listen", "drain-grace"}},
}

// printUsage writes -h: the commands, then the flags by group, each as
// flag.PrintDefaults would.
func printUsage(fs *flag.FlagSet, out io.Writer) {
	fmt.Fprintf(out, `Usage: solipsism-node [flags]
       solipsism-node token --key K [--prefix P] [--admin]   sign a token (see -h of the command)
       solipsism-node export|import [--data-dir D]           back the store up, or restore it
       solipsism-node --version

Every flag may also be set as an environment variable, e.g. --read-limit as %s.
`, envName("read-limit"))
	seen := map[string]bool{}
	for _, g := range flagGroups {
		fmt.Fprintf(out, "\n%s:\n", g.title)
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				printFlag(out, f)
				seen[name] = true
			}
		}
	}
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if seen[f.Name] {
			return
		}
		if first {
			fmt.Fprintln(out, "\nOther:")
			first = false
		}
		printFlag(out, f)
	})
}

func printFlag(out io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if name != "" {
		line += " " + name
	}
	line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
		line += fmt.Sprintf(" (default %s)", f.DefValue)
	}
	fmt.Fprintln(out, line)
}
