package engine

import (
	"context"
	"encoding/json"
	"strings"
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
			e := NewWorkflowClient(rec, NewTaskQueues("test."), Limits{PayloadLimit: tc.limit})
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
