// Package teamservice is a small team's own Temporal application, as it
// would be before Sluice: a workflow type (ChargeCustomer), the activity it
// calls (Charge) and the worker that runs them on the team's own task
// queue (cmd teamworker beside it). Nothing in it knows Sluice. Sluice
// gates it with a one-node TEMPORAL_WORKFLOW definition that names
// ChargeCustomer and the team's queue; the docs page
// docs/gating-temporal-workflows.md walks through that, and the end-to-end
// tests and benchmarks run this very code.
//
// It lives in the product's module, not a module of its own, so that
// `make test` builds, vets and lints it with everything else and the tests
// import the same workflow they gate. It depends on the Temporal Go SDK
// only: a team copies the folder and adds `go.temporal.io/sdk`.
package teamservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// WorkflowType is the name ChargeCustomer is registered under: what a
// TEMPORAL_WORKFLOW node's workflowType names.
const WorkflowType = "ChargeCustomer"

// DefaultTaskQueue is the team's task queue when TEAM_TASK_QUEUE is unset.
const DefaultTaskQueue = "team-billing"

// ChargeInput is what a caller asks ChargeCustomer to do. Sluice passes the
// node's resolved input as the workflow's one argument, so these are the
// fields of the JSON the team enqueues.
type ChargeInput struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amountCents"`
	// HoldMs keeps the charge running this long, so a test or a demo can
	// watch several charges run at once; 0 charges at once.
	HoldMs int64 `json:"holdMs,omitempty"`
	// Decline fails the charge (a non-retryable failure), to show a failed
	// child failing the node.
	Decline bool `json:"decline,omitempty"`
}

// Receipt is ChargeCustomer's result: the node's output in Sluice.
type Receipt struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amountCents"`
	ChargeID    string `json:"chargeId"`
}

// ErrDeclined is the failure type of a declined charge.
const ErrDeclined = "CardDeclined"

// ChargeCustomer charges a customer through the Charge activity, after
// holding for HoldMs (a durable timer, so a worker restart keeps it).
func ChargeCustomer(ctx workflow.Context, in ChargeInput) (Receipt, error) {
	if in.Customer == "" || in.AmountCents <= 0 {
		return Receipt{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("a charge needs a customer and a positive amount, got %q and %d", in.Customer, in.AmountCents), "BadCharge", nil)
	}
	if in.HoldMs > 0 {
		if err := workflow.Sleep(ctx, time.Duration(in.HoldMs)*time.Millisecond); err != nil {
			return Receipt{}, err
		}
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 2 * time.Second},
	})
	var receipt Receipt
	err := workflow.ExecuteActivity(ctx, (*Activities).Charge, in).Get(ctx, &receipt)
	return receipt, err
}

// Activities holds what the team's activities need; a real service would
// keep its payment provider's client here.
type Activities struct{}

// Charge charges the customer: here it only makes the charge id from the
// workflow id, so that a retried activity charges once.
func (*Activities) Charge(ctx context.Context, in ChargeInput) (Receipt, error) {
	if in.Decline {
		return Receipt{}, temporal.NewNonRetryableApplicationError("card declined for "+in.Customer, ErrDeclined, errors.New("declined"))
	}
	info := activity.GetInfo(ctx)
	return Receipt{Customer: in.Customer, AmountCents: in.AmountCents, ChargeID: "ch_" + info.WorkflowExecution.ID}, nil
}

// Register puts the team's workflow and activity on w.
func Register(w worker.Registry) {
	w.RegisterWorkflowWithOptions(ChargeCustomer, workflow.RegisterOptions{Name: WorkflowType})
	w.RegisterActivity(&Activities{})
}
