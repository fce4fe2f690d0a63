package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/peer"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "solipsism test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	kder, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestProcessTLSAndAuth: a server process on wss:// with authentication
// on; a proxy process trusting its certificate (--tls-ca) and presenting
// a token (--upstream-token); a client through the proxy, and one without
// a token refused.
func TestProcessTLSAndAuth(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	secret := []byte("0123456789abcdef0123456789abcdef")
	key := hex.EncodeToString(secret)
	server := startProc(t, "--tls-cert", certFile, "--tls-key", keyFile, "--auth-key", key, "--tick", "10ms")
	wss := "wss://" + server.Addr + "/ws"
	proxyTok, _ := auth.Issue(secret, nil, []string{"proxy", "player"}, time.Now().Add(time.Hour))
	proxy := startProc(t, "--role", "proxy", "--upstream", wss, "--tls-ca", certFile, "--upstream-token", proxyTok, "--prefix", "proxy", "--tick", "10ms")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	dial := peer.DialOptions{HTTPClient: &http.Client{Transport: tr}}

	if _, err := peer.Dial(ctx, wss, dial); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without a token: %v, want HTTP 401", err)
	}
	var he *peer.HandshakeError
	if _, err := peer.Dial(ctx, "ws://"+server.Addr+"/ws", peer.DialOptions{}); err == nil || errors.As(err, &he) && he.StatusCode == 101 {
		t.Fatal("plain ws:// reached a TLS listener")
	}
	playerTok, _ := auth.Issue(secret, nil, []string{"player"}, time.Now().Add(time.Hour))
	direct, err := client.Dial(ctx, wss, client.Options{Prefix: "player", Token: playerTok, Dial: dial, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	// The proxy takes no token of its own clients (it has no --auth-key);
	// the server checks the whole chain against the proxy's token.
	via, err := client.Dial(ctx, proxy.URL(), client.Options{Prefix: "player", Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer via.Close()
	box, _ := via.Create(map[string]any{"through": "proxy"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := direct.World().Get(box); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the direct client never saw the proxied client's box\nserver:\n%s\nproxy:\n%s", server.Log(), proxy.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
