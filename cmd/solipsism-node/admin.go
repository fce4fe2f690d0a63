package main

import (
	"errors"
	"net/http"

	"github.com/solipsism/mesh/auth"
)

// adminOnly guards an admin endpoint (the node's state, the inspector,
// metrics, profiles: they name every object, owner and client address)
// when authentication is on: the request must carry a token (query
// parameter token, or Authorization: Bearer) with the admin claim. Without
// a valid token it answers 401, with one that is not an admin's 403.
// Without authentication it serves everyone, as every endpoint does.
func adminOnly(authn auth.Authenticator, h http.Handler) http.Handler {
	if authn == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, err := authn.Authenticate(auth.FromRequest(r))
		switch {
		case errors.Is(err, auth.ErrMissing):
			w.Header().Set("WWW-Authenticate", `Bearer realm="solipsism admin"`)
			http.Error(w, "an admin token is required (query parameter token, or Authorization: Bearer)", http.StatusUnauthorized)
		case err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="solipsism admin", error="invalid_token"`)
			http.Error(w, "the token is not valid", http.StatusUnauthorized)
		case !g.Admin:
			http.Error(w, "the token has no admin claim (solipsism-node token --admin)", http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}
