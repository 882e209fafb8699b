package engine

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// loadRetryOutputsActivity is the local activity that reads them.
const loadRetryOutputsActivity = "LoadRetryOutputs"

// RetryOutputsInput names a retry and the execution it retries. Limit
// bounds the bytes of outputs handed back (they travel in the history).
type RetryOutputsInput struct {
	ExecutionID string
	RetryOf     string
	Limit       int
}

// RetryOutputs are the recorded outputs a retry reuses, by node key.
type RetryOutputs struct {
	Outputs map[string]json.RawMessage
}

// loadReused reads, for a retry, the outputs it reuses (Runs.RetryOutputs)
// and returns a failure message, "" on success. A retry that cannot read
// them fails rather than run again nodes that completed.
func (r *executionRun) loadReused() string {
	if r.in.RetryOf == "" {
		return ""
	}
	var out RetryOutputs
	err := workflow.ExecuteLocalActivity(bookkeeping(r.ctx), loadRetryOutputsActivity, RetryOutputsInput{
		ExecutionID: r.executionID, RetryOf: r.in.RetryOf, Limit: r.limits.PayloadLimit,
	}).Get(r.ctx, &out)
	if err != nil {
		return "reading the outputs of retried execution " + r.in.RetryOf + ": " + errorMessage(err)
	}
	r.reused = out.Outputs
	return ""
}

// reuse ends node n with the output its original recorded, when the
// retry reuses one, in place of running it; the workflow records it
// COMPLETED with that output.
func (r *executionRun) reuse(sel workflow.Selector, n domain.Node) bool {
	out, ok := r.reused[n.Key]
	if !ok {
		return false
	}
	delete(r.reused, n.Key)
	r.started(n)
	f, outcome := workflow.NewFuture(r.ctx)
	outcome.Set(nil, nil)
	sel.AddFuture(f, func(workflow.Future) {
		now := r.now()
		r.last = nodeOutcome{node: n, output: out, started: &now, ended: &now, attempt: 1}
	})
	return true
}
