// Package auth checks the signed tokens peers present to join a node: JWTs
// (HS256 with a shared secret, or EdDSA with an Ed25519 public key) that
// name the world identifiers their holder may claim and expire. It uses
// github.com/golang-jwt/jwt/v5. Besides an http.Handler that issues tokens
// (TokenEndpoint, an example for a login service to build on), it does no
// I/O.
package auth
