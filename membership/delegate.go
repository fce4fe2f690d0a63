package membership

import (
	"bytes"
	"context"
	"log/slog"
)

// delegate is the memberlist.Delegate: only NodeMeta carries anything;
// the worlds travel over the members' WebSocket links.
type delegate struct{ m *Membership }

func (d delegate) NodeMeta(limit int) []byte {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	return d.m.meta
}

func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

// logWriter routes memberlist's "[LEVEL] text" lines into slog.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG] ": slog.LevelDebug, "[INFO] ": slog.LevelInfo, "[WARN] ": slog.LevelWarn, "[ERR] ": slog.LevelError} {
		if i := bytes.Index(line, []byte(prefix)); i >= 0 {
			level, line = l, line[i+len(prefix):]
			break
		}
	}
	w.log.Log(context.Background(), level, string(line), "component", "memberlist")
	return len(p), nil
}
