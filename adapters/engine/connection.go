package engine

import (
	"crypto/tls"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
)

// Connection says how to reach a Temporal cluster: a local dev server in
// plain text, a production cluster over TLS or mTLS, or Temporal Cloud with
// an API key over TLS.
type Connection struct {
	Address   string
	Namespace string
	// TLS turns TLS on when non-nil: the CA to trust, the server name to
	// verify, and for mTLS the client certificate.
	TLS *tls.Config
	// APIKey is sent as a bearer credential on every call; only over TLS.
	APIKey string
	// Interceptors wrap every client call and every worker built on the
	// client, such as the tracing interceptor.
	Interceptors []interceptor.ClientInterceptor
}

// ClientOptions are the SDK options for c.
func (c Connection) ClientOptions(log *slog.Logger) client.Options {
	opts := client.Options{
		HostPort:          c.Address,
		Namespace:         c.Namespace,
		Logger:            tlog.NewStructuredLogger(log),
		ConnectionOptions: client.ConnectionOptions{TLS: c.TLS},
		Interceptors:      c.Interceptors,
	}
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	return opts
}
