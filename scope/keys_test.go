package scope

import (
	"slices"
	"testing"
)

func TestKeyed(t *testing.T) {
	ids := []string{"a", "12,31,5", "31,31,31", "123456789", "a\x00b", "\x00", "été", "éééé", "x"}
	var m keyed[int]
	for i, id := range ids {
		m.put(id, i)
	}
	m.put("x", 100)
	m.del("a")
	if m.len() != len(ids)-1 {
		t.Fatalf("len %d", m.len())
	}
	for i, id := range ids {
		v, ok := m.get(id)
		switch {
		case id == "a" && ok:
			t.Fatal("a deleted element is there")
		case id == "x" && v != 100, id != "a" && id != "x" && (!ok || v != i):
			t.Fatalf("%q: %d %v", id, v, ok)
		}
	}
	var got []string
	for id := range m.all() {
		got = append(got, id)
	}
	slices.Sort(got)
	want := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == "a" })
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("all: %q, want %q", got, want)
	}
}
