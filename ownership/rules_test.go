package ownership

import (
	"errors"
	"fmt"
	"testing"
)

// TestMaySend enumerates every role, link kind and owner category.
func TestMaySend(t *testing.T) {
	type cat struct {
		name string
		o    Owner
	}
	cats := []cat{
		{"mine-or-behind-me", Owner{Local: true}},
		{"link-chain", Owner{InLinkChain: true}},
		{"elsewhere", Owner{}},
	}
	// want[role][kind] lists the categories that are sent.
	want := map[Role]map[LinkKind][]string{
		Client: {Upstream: {"mine-or-behind-me"}},
		Proxy: {
			Upstream:   {"mine-or-behind-me"},
			Downstream: {"mine-or-behind-me", "elsewhere"},
		},
		Server: {
			Downstream: {"mine-or-behind-me", "elsewhere"},
			Mesh:       {"mine-or-behind-me"},
		},
	}
	for _, role := range []Role{Client, Proxy, Server} {
		for _, kind := range []LinkKind{Downstream, Upstream, Mesh} {
			for _, c := range cats {
				t.Run(fmt.Sprintf("%s/%s/%s", role, kind, c.name), func(t *testing.T) {
					exp := false
					for _, n := range want[role][kind] {
						exp = exp || n == c.name
					}
					if got := MaySend(role, kind, c.o); got != exp {
						t.Fatalf("MaySend = %v, want %v", got, exp)
					}
				})
			}
		}
	}
}

func TestMaySendNoEcho(t *testing.T) {
	// A downstream proxy's own objects are local to us and in its chain:
	// never echoed back to it.
	for _, role := range []Role{Proxy, Server} {
		if MaySend(role, Downstream, Owner{Local: true, InLinkChain: true}) {
			t.Fatalf("%s echoes a link's own object", role)
		}
	}
}

func TestMayAccept(t *testing.T) {
	tests := []struct {
		role Role
		kind LinkKind
		o    Owner
		want error
	}{
		{Server, Downstream, Owner{InLinkChain: true, Local: true}, nil},
		{Server, Downstream, Owner{Local: true}, ErrNotOwner},
		{Server, Downstream, Owner{}, ErrNotOwner},
		{Server, Mesh, Owner{InLinkChain: true}, nil},
		{Server, Mesh, Owner{Local: true}, ErrNotOwner},
		{Server, Mesh, Owner{}, ErrNotOwner},
		{Server, Upstream, Owner{}, ErrUnexpectedLink},
		{Proxy, Downstream, Owner{InLinkChain: true, Local: true}, nil},
		{Proxy, Downstream, Owner{Local: true}, ErrNotOwner},
		{Proxy, Downstream, Owner{}, ErrNotOwner},
		{Proxy, Upstream, Owner{}, nil},
		{Proxy, Upstream, Owner{InLinkChain: true}, nil},
		{Proxy, Upstream, Owner{Local: true}, ErrLocalObject},
		{Proxy, Mesh, Owner{InLinkChain: true}, ErrUnexpectedLink},
		{Client, Upstream, Owner{}, nil},
		{Client, Upstream, Owner{Local: true}, ErrLocalObject},
		{Client, Downstream, Owner{InLinkChain: true}, ErrUnexpectedLink},
		{Client, Mesh, Owner{InLinkChain: true}, ErrUnexpectedLink},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%+v", tt.role, tt.kind, tt.o), func(t *testing.T) {
			if err := MayAccept(tt.role, tt.kind, tt.o); !errors.Is(err, tt.want) {
				t.Fatalf("MayAccept = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range []Role{Client, Proxy, Server} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Fatalf("ParseRole(%q) = %v, %v", r.String(), got, err)
		}
	}
	if _, err := ParseRole("relay"); err == nil {
		t.Fatal("ParseRole accepted an unknown role")
	}
}
