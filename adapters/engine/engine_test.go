package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// startRecorder is a Temporal client that keeps the input of the workflow
// it is asked to start and answers as if it started.
type startRecorder struct {
	client.Client
	in ExecutionInput
}

func (r *startRecorder) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

func (r *startRecorder) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	r.in = args[0].(ExecutionInput)
	return nil, nil
}

// TestStartWorkflowCarriesTheGraphWithinTheConfiguredPayloadLimit: the
// start carries the graph only while input and graph together fit the
// payload limit the engine was given, the one the workers enforce. It used
// the default whatever was configured, so a lowered limit let through
// starts the workers' limit was meant to refuse, and a raised one made
// every such run load its graph again.
func TestStartWorkflowCarriesTheGraphWithinTheConfiguredPayloadLimit(t *testing.T) {
	t.Parallel()
	graph := json.RawMessage(`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":"` + strings.Repeat("g", 1000) + `"}}],"edges":[]}`)
	for _, tc := range []struct {
		name      string
		limit     int
		inputSize int
		carried   bool
	}{
		{name: "under a lowered limit", limit: 4096, inputSize: 1000, carried: true},
		{name: "over a lowered limit", limit: 2048, inputSize: 1500, carried: false},
		{name: "over the default, under a raised limit", limit: 1_900_000, inputSize: DefaultPayloadLimit, carried: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &startRecorder{}
			e := NewWorkflowClient(rec, NewTaskQueues("test."), RunLimits{PayloadLimit: tc.limit})
			input := json.RawMessage(`{"s":"` + strings.Repeat("i", tc.inputSize) + `"}`)
			err := e.StartWorkflow(context.Background(), ports.WorkflowStart{ExecutionID: domain.ID(uuid.New()), Input: input, Graph: graph})
			if err != nil {
				t.Fatal(err)
			}
			if carried := rec.in.Graph != nil; carried != tc.carried {
				t.Errorf("graph carried = %v with %d bytes of input and graph under a limit of %d, want %v",
					carried, len(input)+len(graph), tc.limit, tc.carried)
			}
		})
	}
}

// firstCallCounter is a Temporal client that counts health checks and
// starts; its health check fails while down is set.
type firstCallCounter struct {
	client.Client
	down   atomic.Bool
	checks atomic.Int32
	starts atomic.Int32
}

func (c *firstCallCounter) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	c.checks.Add(1)
	if c.down.Load() {
		return nil, errors.New("connection refused")
	}
	return &client.CheckHealthResponse{}, nil
}

func (c *firstCallCounter) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	c.starts.Add(1)
	return nil, nil
}

// TestTheFirstStartsInParallelLoadTheCapabilitiesOnce: the SDK reads the
// server's capabilities without its lock when it starts a workflow, so the
// client has them loaded by one call before any start runs; a load that
// fails is tried again by the next call.
func TestTheFirstStartsInParallelLoadTheCapabilitiesOnce(t *testing.T) {
	t.Parallel()
	c := &firstCallCounter{}
	e := NewWorkflowClient(c, NewTaskQueues("test."), RunLimits{})
	c.down.Store(true)
	if err := e.StartWorkflow(context.Background(), ports.WorkflowStart{ExecutionID: domain.ID(uuid.New())}); err == nil {
		t.Fatal("a start while the server is down succeeded")
	}
	if c.starts.Load() != 0 {
		t.Fatal("a start ran before the capabilities were loaded")
	}
	c.down.Store(false)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := e.StartWorkflow(context.Background(), ports.WorkflowStart{ExecutionID: domain.ID(uuid.New())}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := c.checks.Load(); got != 2 {
		t.Errorf("%d capability loads, want 2: the failed one and one for all 20 parallel starts", got)
	}
	if got := c.starts.Load(); got != 20 {
		t.Errorf("%d starts, want 20", got)
	}
}
