package engine

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// armDeadline starts the run's deadline timer, if it has a deadline, and
// returns the context the run goes on with: one the timer cancels, so
// that the deadline takes the path of a cancellation (nodes in flight
// CANCELLED, the rest SKIPPED) but is recorded with its own reason. The
// deadline counts from the workflow's start.
func (r *executionRun) armDeadline(g domain.Graph) workflow.Context {
	limit := g.RunTimeout.Std()
	if d := r.in.RunTimeout; d > 0 && (limit == 0 || d < limit) {
		limit = d
	}
	if limit <= 0 {
		return r.ctx
	}
	ctx, cancel := workflow.WithCancel(r.ctx)
	left := limit - workflow.Now(r.ctx).Sub(workflow.GetInfo(r.ctx).WorkflowStartTime)
	r.deadlineAt = workflow.Now(r.ctx).Add(left)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if workflow.NewTimer(ctx, max(left, time.Millisecond)).Get(ctx, nil) == nil {
			r.deadline = fmt.Sprintf("run deadline of %s passed", limit)
			cancel()
		}
	})
	r.ctx = ctx
	return ctx
}

// cancelReason is what a cancelled node or run records: the deadline that
// passed, else a cancellation.
func (r *executionRun) cancelReason() string {
	if r.deadline != "" {
		return r.deadline
	}
	return "execution cancelled"
}

// timedOut records the nodes the deadline kept from running as SKIPPED
// and the execution CANCELLED with the deadline as its reason. Unlike a
// requested cancellation, the workflow then completes: nobody asked
// Temporal to cancel it.
func (r *executionRun) timedOut(unrun []string) (ExecutionResult, error) {
	r.record(r.skipped(unrun, r.deadline)...)
	return r.finish(domain.ExecutionCancelled, r.deadline)
}
