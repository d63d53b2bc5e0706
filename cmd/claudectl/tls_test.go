package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "claudectl test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// TestServeTLS: with a certificate the daemon speaks HTTPS (HTTP/2 by
// ALPN); grpcurl and claudectl's own client commands connect with the
// token, trusting the test certificate; plain HTTP gets nowhere.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	grpcurl := os.Getenv("CLAUDECTL_TEST_GRPCURL")
	if _, err := os.Stat(grpcurl); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("grpcurl not installed at %q (make test installs it)", grpcurl)
		}
		t.Skip("grpcurl not installed; make test installs it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "claudectl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cert, _ := writeCert(t, dir)
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("s3cret-token\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	settings := filepath.Join(dir, "settings.json")
	os.WriteFile(settings, []byte(`{"listen": "`+addr+`", "tls_cert_file": "cert.pem", "tls_key_file": "key.pem", "token_file": "token", "data_dir": "data"}`), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serve := exec.CommandContext(ctx, bin, "serve", "--config", settings, "--cli", claudetest.CLIPath(t))
	var log strings.Builder
	serve.Stderr = &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Wait()
	defer serve.Process.Kill()

	env := append(os.Environ(), "SSL_CERT_FILE="+cert, "CLAUDECTL_SERVER=https://"+addr, "HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var out []byte
	for i := 0; ; i++ {
		c := exec.CommandContext(ctx, bin, "sessions", "--token-file", token)
		c.Env = env
		out, err = c.CombinedOutput()
		if err == nil || i == 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(string(out), "No sessions.") {
		t.Fatalf("claudectl sessions over HTTPS: %v\n%s\nserve:\n%s", err, out, log.String())
	}
	// A second daemon on the address is told that a claudectl daemon (over
	// TLS) holds it.
	second := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data2"), "--cli", claudetest.CLIPath(t))
	second.Env = []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), addr+" is in use: another claudectl daemon serves there") {
		t.Errorf("a second daemon on %s: %v\n%s", addr, err, out)
	}
	g := exec.CommandContext(ctx, grpcurl, "-cacert", cert, "-H", "authorization: Bearer s3cret-token", addr, "claudectl.v1.HealthService/Health")
	if out, err := g.CombinedOutput(); err != nil || !strings.Contains(string(out), `"ok": true`) {
		t.Errorf("grpcurl over TLS: %v\n%s", err, out)
	}
	g = exec.CommandContext(ctx, grpcurl, "-plaintext", "-H", "authorization: Bearer s3cret-token", addr, "claudectl.v1.HealthService/Health")
	if out, err := g.CombinedOutput(); err == nil {
		t.Errorf("grpcurl in plain text reached the TLS daemon:\n%s", out)
	}
}
