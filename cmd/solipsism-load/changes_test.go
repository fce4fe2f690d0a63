package main

import "testing"

// TestChangeLog: the change after a value is found while the log holds
// the change before it; an object the log never saw, and a value older
// than every change it keeps, are unknown.
func TestChangeLog(t *testing.T) {
	var l changeLog
	for i := int64(1); i <= keptChanges+10; i++ {
		l.note("a", 100*i) // changes at 100, 200, ... 7400
	}
	l.note("b", 50)
	for _, tc := range []struct {
		obj    string
		prev   int64
		want   int64
		wantOK bool
	}{
		{"a", 7300, 7400, true},
		{"a", 7350, 7400, true}, // between two changes: the next one
		{"a", 1200, 1300, true}, // the oldest kept is 1100
		{"a", 1100, 1200, true},
		{"a", 1000, 0, false}, // 1100 is the oldest kept: what came between is lost
		{"a", 7400, 0, false}, // not superseded
		{"b", 10, 0, false},   // before its first change
		{"c", 10, 0, false},   // another process's
	} {
		got, ok := l.supersededAt(tc.obj, tc.prev)
		if ok != tc.wantOK || ok && got != tc.want {
			t.Errorf("supersededAt(%s, %d) = %d, %v; want %d, %v", tc.obj, tc.prev, got, ok, tc.want, tc.wantOK)
		}
	}
}
