package service

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// temporalTLS reads TEMPORAL_TLS, TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY,
// TEMPORAL_TLS_CA and TEMPORAL_TLS_SERVER_NAME into a TLS configuration,
// loading the files now so that a bad one stops the start with the
// variable's name rather than failing the first call. nil means plain text.
// TLS is on when TEMPORAL_TLS=true or any of the others is set; with none
// of the files it trusts the system's roots, as Temporal Cloud needs with an
// API key.
func temporalTLS(e *env) *tls.Config {
	certFile := e.str("TEMPORAL_TLS_CERT", "")
	keyFile := e.str("TEMPORAL_TLS_KEY", "")
	caFile := e.str("TEMPORAL_TLS_CA", "")
	serverName := e.str("TEMPORAL_TLS_SERVER_NAME", "")
	on := e.boolean("TEMPORAL_TLS", certFile != "" || keyFile != "" || caFile != "" || serverName != "")
	if apiKey := e.str("TEMPORAL_API_KEY", ""); apiKey != "" && !on {
		e.bad("TEMPORAL_API_KEY", "***", "an API key is only sent over TLS: set TEMPORAL_TLS=true (or TEMPORAL_TLS_CA)")
	}
	if !on {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	switch {
	case certFile != "" && keyFile == "":
		e.bad("TEMPORAL_TLS_KEY", "", "TEMPORAL_TLS_CERT is set: set the client certificate's private key too")
	case certFile == "" && keyFile != "":
		e.bad("TEMPORAL_TLS_CERT", "", "TEMPORAL_TLS_KEY is set: set the client certificate too")
	case certFile != "":
		certPEM, certOK := readFile(e, "TEMPORAL_TLS_CERT", certFile)
		keyPEM, keyOK := readFile(e, "TEMPORAL_TLS_KEY", keyFile)
		if certOK && keyOK {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				e.bad("TEMPORAL_TLS_CERT", certFile, "not a PEM certificate matching TEMPORAL_TLS_KEY: "+err.Error())
			} else {
				cfg.Certificates = []tls.Certificate{pair}
			}
		}
	}
	if caFile != "" {
		if caPEM, ok := readFile(e, "TEMPORAL_TLS_CA", caFile); ok {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(caPEM) {
				e.bad("TEMPORAL_TLS_CA", caFile, "holds no PEM certificate")
			} else {
				cfg.RootCAs = pool
			}
		}
	}
	return cfg
}

func readFile(e *env, name, path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		e.bad(name, path, fmt.Sprintf("cannot read the file: %v", err))
		return nil, false
	}
	return b, true
}
