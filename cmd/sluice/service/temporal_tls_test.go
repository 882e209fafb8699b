package service

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// testCA is a certificate authority made by a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for loopback, usable by a server and a
// client, and returns its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, name string, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startTLSTemporal runs `devstack temporal` with mTLS on a free port and
// returns its address.
func startTLSTemporal(t *testing.T, certFile, keyFile, caFile string) string {
	t.Helper()
	bin := os.Getenv("DEVSTACK_BIN")
	if bin == "" {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") != "" {
			t.Fatal("DEVSTACK_BIN is not set; run through `make test`")
		}
		t.Skip("DEVSTACK_BIN not set: TLS test skipped (run `make test`)")
	}
	cmd := exec.Command(bin, "temporal", "-port", "0", "-log", filepath.Join(t.TempDir(), "temporal.log"),
		"-tls-cert", certFile, "-tls-key", keyFile, "-tls-ca", caFile, "-tls-require-client-cert")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "temporal listening on "); ok {
				addr <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(2 * time.Minute):
		t.Fatal("devstack temporal with TLS did not start within 2 minutes")
		return ""
	}
}

// TestTemporalConnectsOverMutualTLS runs a Temporal frontend that requires
// client certificates, with certificates the test makes, and connects
// through the configuration sluice reads: the right CA and a client
// certificate get through (also with an API key); no client certificate,
// a CA that did not sign the server's certificate, or plain text are
// refused.
func TestTemporalConnectsOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "sluice test CA")
	other := newTestCA(t, "another CA")
	serverCert, serverKey := ca.issue(t, "temporal", 2)
	clientCert, clientKey := ca.issue(t, "sluice", 3)
	caFile := writeFile(t, dir, "ca.pem", ca.pem)
	otherCAFile := writeFile(t, dir, "other-ca.pem", other.pem)
	certFile, keyFile := writeFile(t, dir, "client.pem", clientCert), writeFile(t, dir, "client-key.pem", clientKey)
	addr := startTLSTemporal(t, writeFile(t, dir, "server.pem", serverCert), writeFile(t, dir, "server-key.pem", serverKey), caFile)

	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"mTLS with the right CA", map[string]string{"TEMPORAL_TLS_CA": caFile, "TEMPORAL_TLS_CERT": certFile, "TEMPORAL_TLS_KEY": keyFile}, true},
		{"mTLS with an API key", map[string]string{"TEMPORAL_TLS_CA": caFile, "TEMPORAL_TLS_CERT": certFile, "TEMPORAL_TLS_KEY": keyFile,
			"TEMPORAL_API_KEY": "test-api-key", "TEMPORAL_TLS_SERVER_NAME": "localhost"}, true},
		{"TLS without a client certificate", map[string]string{"TEMPORAL_TLS_CA": caFile}, false},
		{"a CA that did not sign the server", map[string]string{"TEMPORAL_TLS_CA": otherCAFile, "TEMPORAL_TLS_CERT": certFile, "TEMPORAL_TLS_KEY": keyFile}, false},
		{"plain text", map[string]string{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"TEMPORAL_ADDRESS": addr}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, false)
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.NewLazyClient(cfg.Temporal.ClientOptions(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("connected")
				}
				t.Logf("refused as it should be: %v", err)
			}
		})
	}
}

// TestTemporalTLSConfigNamesTheVariableAtFault checks the start-up
// validation of the Temporal connection variables.
func TestTemporalTLSConfigNamesTheVariableAtFault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	cert, key := ca.issue(t, "c", 2)
	caFile, certFile, keyFile := writeFile(t, dir, "ca.pem", ca.pem), writeFile(t, dir, "c.pem", cert), writeFile(t, dir, "k.pem", key)
	junk := writeFile(t, dir, "junk.pem", []byte("not a certificate"))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name    string
		env     map[string]string
		culprit string // "" for a valid configuration
	}{
		{"mTLS", map[string]string{"TEMPORAL_TLS_CA": caFile, "TEMPORAL_TLS_CERT": certFile, "TEMPORAL_TLS_KEY": keyFile}, ""},
		{"API key with TLS on the system roots", map[string]string{"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "true"}, ""},
		{"certificate without key", map[string]string{"TEMPORAL_TLS_CERT": certFile}, "TEMPORAL_TLS_KEY"},
		{"key without certificate", map[string]string{"TEMPORAL_TLS_KEY": keyFile}, "TEMPORAL_TLS_CERT"},
		{"unreadable CA", map[string]string{"TEMPORAL_TLS_CA": missing}, "TEMPORAL_TLS_CA"},
		{"CA file without a certificate", map[string]string{"TEMPORAL_TLS_CA": junk}, "TEMPORAL_TLS_CA"},
		{"unreadable key", map[string]string{"TEMPORAL_TLS_CERT": certFile, "TEMPORAL_TLS_KEY": missing}, "TEMPORAL_TLS_KEY"},
		{"certificate that is not one", map[string]string{"TEMPORAL_TLS_CERT": junk, "TEMPORAL_TLS_KEY": keyFile}, "TEMPORAL_TLS_CERT"},
		{"API key without TLS", map[string]string{"TEMPORAL_API_KEY": "secret-key"}, "TEMPORAL_API_KEY"},
		{"TEMPORAL_TLS not a boolean", map[string]string{"TEMPORAL_TLS": "maybe"}, "TEMPORAL_TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, false)
			if tc.culprit == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Temporal.TLS == nil {
					t.Error("TLS is off")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.culprit) {
				t.Fatalf("error %v does not name %s", err, tc.culprit)
			}
			if strings.Contains(err.Error(), "secret-key") {
				t.Errorf("the error shows the API key: %v", err)
			}
		})
	}
}
