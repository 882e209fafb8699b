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
