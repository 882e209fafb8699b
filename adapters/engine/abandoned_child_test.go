package engine

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// terminationRefuser is a Temporal client whose child is still running and
// whose terminations time out, while signals go through: the partial
// outage in which every walk of the reconciler would signal the parent
// again.
type terminationRefuser struct {
	client.Client
	signals, terminations int
}

func (r *terminationRefuser) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

func (r *terminationRefuser) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{}, nil
}

func (r *terminationRefuser) SignalWorkflow(context.Context, string, string, string, any) error {
	r.signals++
	return nil
}

func (r *terminationRefuser) TerminateWorkflow(context.Context, string, string, string, ...any) error {
	r.terminations++
	return serviceerror.NewDeadlineExceeded("termination timed out")
}

// TestAnAbandonedChildsParentIsSignalledOnceHoweverOftenItsTerminationFails
// shows that a termination failing walk after walk adds one event to the
// parent's history, not one per walk.
func TestAnAbandonedChildsParentIsSignalledOnceHoweverOftenItsTerminationFails(t *testing.T) {
	fake := &terminationRefuser{}
	e := NewWorkflowClient(fake, TaskQueues{}, RunLimits{})
	child := ports.RunningChild{ExecutionID: domain.ID(uuid.New()), NodeKey: "charge", WorkflowID: "execution-x/charge", RunID: "r1"}
	for walk := range 5 {
		if err := e.EndAbandonedChild(t.Context(), child, "no worker"); err == nil {
			t.Fatalf("walk %d: a failed termination reported as done", walk)
		}
	}
	if fake.signals != 1 || fake.terminations != 5 {
		t.Fatalf("5 walks signalled the parent %d times and asked the termination %d times, want 1 and 5", fake.signals, fake.terminations)
	}
	other := child
	other.RunID = "r2"
	if err := e.EndAbandonedChild(t.Context(), other, "no worker"); err == nil {
		t.Fatalf("another run of the child: %v", err)
	}
	if fake.signals != 2 {
		t.Fatalf("another run of the child did not signal its parent (%d signals)", fake.signals)
	}
}
