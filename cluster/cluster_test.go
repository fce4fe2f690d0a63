package cluster_test

import (
	"strings"
	"testing"

	"github.com/solipsism/mesh/cluster"
	"github.com/solipsism/mesh/ownership"
	"github.com/solipsism/mesh/relay"
)

// Join refuses what cannot be a member, with a clear error, and changes
// nothing: a node that is not a server, a member without a URL to dial it
// at, a node in a mesh already.
func TestJoinRefuses(t *testing.T) {
	server, _ := relay.New(relay.Options{})
	url, stop := serve(server)
	defer stop()
	proxy, _ := relay.New(relay.Options{Role: ownership.Proxy})
	defer proxy.Close(t.Context())
	m, err := cluster.Join(server, cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: url, Profile: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tc := range []struct {
		name string
		n    *relay.Node
		opts cluster.Options
		want string
	}{
		{"a proxy", proxy, cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: url}, "only server nodes"},
		{"no URL", server, cluster.Options{BindAddr: "127.0.0.1:0"}, "advertise URL"},
		{"twice", server, cluster.Options{BindAddr: "127.0.0.1:0", AdvertiseURL: url, Profile: "local"}, "in a mesh already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := cluster.Join(tc.n, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Join = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if st := server.MeshStatus(); st == nil || st.Name != m.Name() {
		t.Fatalf("the first mesh is no longer the node's: %+v", st)
	}
}
