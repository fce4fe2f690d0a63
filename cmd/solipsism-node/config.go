package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/peer"
)

// config is the parsed command line.
type config struct {
	listen     string
	role       ownership.Role
	prefix     string
	tick       time.Duration
	readLimit  int64
	origins    []string
	logLevel   slog.Level
	logFormat  string
	upstream   string
	backoffMin time.Duration
	backoffMax time.Duration
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "SOLIPSISM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig parses args, filling flags not given from the environment.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("solipsism-node", flag.ContinueOnError)
	fs.SetOutput(out)
	var (
		c                              config
		role, origins, level, readLim string
	)
	fs.StringVar(&c.listen, "listen", ":8080", "HTTP listen address")
	fs.StringVar(&role, "role", "server", "node role: server or proxy")
	fs.StringVar(&c.prefix, "prefix", "", "prefix of the node's world identifier (default: the role)")
	fs.DurationVar(&c.tick, "tick", peer.DefaultTick, "how often each link flushes its coalesced changes; 0 sends immediately")
	fs.StringVar(&readLim, "read-limit", "1MiB", "largest accepted message (bytes, or with KiB/MiB)")
	fs.StringVar(&origins, "origin", "", "comma-separated browser origin host patterns allowed besides same-origin ('*' for any)")
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.upstream, "upstream", "", "proxy role: ws:// or wss:// URL of the upstream server or proxy")
	fs.DurationVar(&c.backoffMin, "backoff-min", 100*time.Millisecond, "first reconnect delay toward the upstream")
	fs.DurationVar(&c.backoffMax, "backoff-max", 5*time.Second, "longest reconnect delay toward the upstream")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: solipsism-node [flags]\n\nEvery flag may also be set as an environment variable, e.g. --read-limit as %s.\n\n", envName("read-limit"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = errors.Join(envErr, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	var err error
	if c.role, err = ownership.ParseRole(role); err != nil || c.role == ownership.Client {
		return c, fmt.Errorf("--role: want server or proxy, got %q", role)
	}
	if c.readLimit, err = parseSize(readLim); err != nil {
		return c, fmt.Errorf("--read-limit: %w", err)
	}
	if c.tick < 0 {
		return c, fmt.Errorf("--tick: must not be negative")
	}
	if err := c.logLevel.UnmarshalText([]byte(level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, fmt.Errorf("--log-format: want text or json, got %q", c.logFormat)
	}
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.origins = append(c.origins, o)
		}
	}
	if c.role == ownership.Proxy && c.upstream == "" {
		return c, errors.New("--role proxy needs --upstream ws://host:port/ws")
	}
	if c.upstream != "" && !strings.HasPrefix(c.upstream, "ws://") && !strings.HasPrefix(c.upstream, "wss://") {
		return c, fmt.Errorf("--upstream: want a ws:// or wss:// URL, got %q", c.upstream)
	}
	if c.upstream != "" && c.role != ownership.Proxy {
		return c, errors.New("--upstream is for --role proxy")
	}
	if c.backoffMin <= 0 || c.backoffMax < c.backoffMin {
		return c, errors.New("--backoff-min must be positive and at most --backoff-max")
	}
	return c, nil
}

// nodeTick maps the flag's "0 means immediately" to the Options convention.
func (c config) nodeTick() time.Duration {
	if c.tick == 0 {
		return peer.Immediate
	}
	return c.tick
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size such as 1048576 or 1MiB")
	}
	return n * mult, nil
}

func newLogger(c config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

