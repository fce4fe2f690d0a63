package auth_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/solipsism/mesh/auth"
)

// A token endpoint for a node started with --auth-key KEY --token-url
// https://login.example/token: the node's pages fetch their tokens from it.
// Grant is where a real service checks who is signed in.
func ExampleTokenEndpoint() {
	key := []byte(strings.Repeat("k", 32)) // the bytes of the node's --auth-key
	ep := &auth.TokenEndpoint{
		Key: key,
		Grant: func(r *http.Request) *auth.Grant {
			if c, err := r.Cookie("session"); err != nil || c.Value != "alice" {
				return nil // not signed in: 401
			}
			return &auth.Grant{Prefixes: auth.PagePrefixes} // a page, in a worker or not
		},
		Origins: []string{"https://world.example"},
	}
	srv := httptest.NewServer(ep)
	defer srv.Close()

	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.AddCookie(&http.Cookie{Name: "session", Value: "alice"})
	res, _ := http.DefaultClient.Do(req)
	tok, _ := io.ReadAll(res.Body)
	res.Body.Close()

	node, _ := auth.NewHS256(key)
	g, err := node.Authenticate(string(tok))
	fmt.Println(res.StatusCode, err, g.Allows("client-AAAAAAAA-BBBBBBBB"), g.Admin)

	res, _ = http.Get(srv.URL) // no session
	res.Body.Close()
	fmt.Println(res.StatusCode)
	// Output:
	// 200 <nil> true false
	// 401
}
