package ownership

import "testing"

func TestPolicyAllows(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		f    Flags
		want bool
	}{
		{"marked: unmarked object", TransferMarked, Flags{}, false},
		{"marked: transferable", TransferMarked, Flags{Transferable: true, Marked: true}, true},
		{"marked: marked not transferable", TransferMarked, Flags{Marked: true}, false},
		{"marked: persistent", TransferMarked, Flags{Persistent: true}, true},
		{"marked: persistent, not transferable", TransferMarked, Flags{Persistent: true, Marked: true}, false},
		{"all: unmarked", TransferAll, Flags{}, true},
		{"all: marked not transferable", TransferAll, Flags{Marked: true}, false},
		{"none: transferable", TransferNone, Flags{Transferable: true, Marked: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Allows(tt.f); got != tt.want {
				t.Fatalf("Allows = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMayClaim(t *testing.T) {
	tests := []struct {
		name string
		role Role
		kind LinkKind
		o    Owner
		ok   bool
	}{
		{"server downstream: for the peer", Server, Downstream, Owner{InLinkChain: true}, true},
		{"server downstream: for another", Server, Downstream, Owner{}, false},
		{"server mesh: for the member's world", Server, Mesh, Owner{InLinkChain: true}, true},
		{"server mesh: for a local world", Server, Mesh, Owner{Local: true}, false},
		{"proxy upstream: for a remote world", Proxy, Upstream, Owner{}, true},
		{"proxy upstream: the upstream's word stands", Proxy, Upstream, Owner{Local: true}, true},
		{"client downstream", Client, Downstream, Owner{InLinkChain: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := MayClaim(tt.role, tt.kind, tt.o); (err == nil) != tt.ok {
				t.Fatalf("MayClaim = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []Policy{TransferMarked, TransferAll, TransferNone} {
		if got, err := ParsePolicy(p.String()); err != nil || got != p {
			t.Fatalf("ParsePolicy(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("some"); err == nil {
		t.Fatal("ParsePolicy accepted an unknown policy")
	}
}
