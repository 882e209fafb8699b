package harness

import (
	"testing"

	"go.temporal.io/sdk/client"
)

// TemporalClient connects to the Temporal server at hostPort, closed when
// the test ends.
func TemporalClient(t *testing.T, hostPort string) client.Client {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: hostPort, Namespace: "default", Logger: NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// NopLogger is a Temporal SDK logger that drops every line, so a test's
// clients do not fill its output.
type NopLogger struct{}

// Debug drops the line.
func (NopLogger) Debug(string, ...any) {}

// Info drops the line.
func (NopLogger) Info(string, ...any) {}

// Warn drops the line.
func (NopLogger) Warn(string, ...any) {}

// Error drops the line.
func (NopLogger) Error(string, ...any) {}
