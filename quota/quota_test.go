package quota_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/quota"
	"github.com/solipsism/mesh/scope"
)

func props(kv ...string) gameworld.Properties {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return gameworld.PropertiesOf(m)
}

// limitOf returns the limit that refused err, "" if none did.
func limitOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var qe *quota.Error
	if !errors.As(err, &qe) || !errors.Is(err, quota.ErrQuota) {
		t.Fatalf("%v is not a quota.Error wrapping ErrQuota", err)
	}
	return qe.Limit
}

func TestCheckObject(t *testing.T) {
	lim := quota.Limits{PropertiesPerObject: 2, ValueBytes: 10, ObjectBytes: 16, ScopeElements: 2, ScopeBytes: 60}
	lim.Defaults()
	existing := &gameworld.Object{ID: "o", Properties: props("a", "1")}
	for _, tc := range []struct {
		name     string
		c        gameworld.Change
		existing *gameworld.Object
		want     string
	}{
		{"fits", gameworld.Change{ID: "o", Properties: props("b", "2")}, existing, ""},
		{"a value too big", gameworld.Change{ID: "o", Properties: props("b", `"0123456789"`)}, nil, "object_size"},
		{"too many properties with those it has", gameworld.Change{ID: "o", Properties: props("b", "2", "c", "3")}, existing, "object_size"},
		{"a replaced property counts once", gameworld.Change{ID: "o", Properties: props("a", "2", "b", "3")}, existing, ""},
		{"too many bytes", gameworld.Change{ID: "o", Properties: props("bbbbbbb", "22222", "c", "3")}, existing, "object_size"},
		{"three elements", gameworld.Change{ID: "o", Scopes: map[string]scope.Delta{"g": {Added: map[string]scope.Fields{"1": {}, "2": {}, "3": {}}}}}, nil, "scope_size"},
		{"two elements", gameworld.Change{ID: "o", Scopes: map[string]scope.Delta{"g": {Added: map[string]scope.Fields{"1": {}, "2": {}}}}}, nil, ""},
		{"a scope's bytes", gameworld.Change{ID: "o", Scopes: map[string]scope.Delta{"g": {Added: map[string]scope.Fields{"1": {"c": json.RawMessage(`"` + strings.Repeat("x", 60) + `"`)}}}}}, nil, "scope_size"},
	} {
		if got := limitOf(t, quota.CheckObject(&lim, tc.c, tc.existing)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLedger(t *testing.T) {
	lim := quota.Limits{ObjectsPerOwner: 2}
	lim.Defaults()
	var l quota.Ledger
	add := func(id string) error {
		return l.Admit(&lim, gameworld.Change{Type: gameworld.Add, ID: id}, nil, "alice")
	}
	if add("1") != nil || add("2") != nil {
		t.Fatal("two adds in one batch refused")
	}
	if got := limitOf(t, add("3")); got != "objects_per_owner" {
		t.Errorf("a third add in the batch: refused by %q", got)
	}
	rec := func(c gameworld.Change) gameworld.Record { return gameworld.Record{Change: c} }
	l.Count([]gameworld.Record{rec(gameworld.Change{Type: gameworld.Add, ID: "1", Owner: "alice"}), rec(gameworld.Change{Type: gameworld.Add, ID: "2", Owner: "alice"})})
	if l.Owned("alice") != 2 || limitOf(t, add("3")) != "objects_per_owner" {
		t.Errorf("after the batch: alice owns %d; a third add taken", l.Owned("alice"))
	}
	l.Count([]gameworld.Record{rec(gameworld.Change{Type: gameworld.Transfer, ID: "1", Owner: "bob", PrevOwner: "alice"})})
	if l.Owned("alice") != 1 || l.Owned("bob") != 1 || add("3") != nil {
		t.Errorf("after a transfer: alice %d, bob %d", l.Owned("alice"), l.Owned("bob"))
	}
	if err := l.Admit(&lim, gameworld.Change{Type: gameworld.Remove, ID: "x"}, nil, "alice"); err != nil {
		t.Errorf("a remove refused: %v", err)
	}
}

func TestCheckWorld(t *testing.T) {
	lim := quota.Limits{WorldObjects: 10, WorldBytes: 100}
	lim.Defaults()
	existing := &gameworld.Object{ID: "o", Properties: props("a", `"0123456789"`)}
	for _, tc := range []struct {
		name     string
		c        gameworld.Change
		existing *gameworld.Object
		objects  int
		bytes    int64
		want     string
	}{
		{"room left", gameworld.Change{ID: "n", Properties: props("a", "1")}, nil, 9, 0, ""},
		{"no room for an object", gameworld.Change{ID: "n", Properties: props("a", "1")}, nil, 10, 0, "world_objects"},
		{"an update of one held", gameworld.Change{ID: "o", Properties: props("a", "1")}, existing, 10, 100, ""},
		{"bytes past the bound", gameworld.Change{ID: "o", Properties: props("b", `"0123456789"`)}, existing, 5, 95, "world_bytes"},
		{"a remove", gameworld.Change{Type: gameworld.Remove, ID: "o"}, existing, 10, 1000, ""},
	} {
		if got := limitOf(t, quota.CheckWorld(&lim, tc.c, tc.existing, tc.objects, tc.bytes)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPerIP(t *testing.T) {
	var p quota.PerIP
	r1, err1 := p.Admit("10.0.0.1", 2)
	_, err2 := p.Admit("10.0.0.1", 2)
	_, err3 := p.Admit("10.0.0.1", 2)
	_, other := p.Admit("10.0.0.2", 2)
	if err1 != nil || err2 != nil || other != nil || limitOf(t, err3) != "connections_per_ip" {
		t.Fatalf("admits: %v %v %v, other %v", err1, err2, err3, other)
	}
	r1()
	r1() // a second release changes nothing
	if _, err := p.Admit("10.0.0.1", 2); err != nil {
		t.Errorf("after a release: %v", err)
	}
	if _, err := p.Admit("10.0.0.1", 2); err == nil {
		t.Error("a double release freed two places")
	}
}
