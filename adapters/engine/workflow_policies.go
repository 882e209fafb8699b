package engine

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/domain"
)

// nodePoliciesChange is the GetVersion change id under which a node's own
// retry policy and timeout (domain.Node.Retry, Timeout) replace the
// worker's. It is asked for only when a node sets one, so the runs of
// graphs without policies record no marker and pay nothing for them.
const nodePoliciesChange = "node-policies"

// attemptPolicy returns the timeout of one attempt of n and its retry
// policy: the node's own where it sets them, the worker's elsewhere.
func (r *executionRun) attemptPolicy(n domain.Node) (time.Duration, *temporal.RetryPolicy) {
	timeout, retry := nodeTimeout(n), r.nodeRetry()
	if n.Retry == nil && n.Timeout == 0 {
		return timeout, retry
	}
	if !r.policiesDecided {
		r.policiesDecided = true
		r.policies = r.changed(nodePoliciesChange)
	}
	if !r.policies {
		return timeout, retry
	}
	if n.Timeout > 0 {
		timeout = n.Timeout.Std()
	}
	if p := n.Retry; p != nil {
		if p.MaxAttempts > 0 {
			retry.MaximumAttempts = int32(min(p.MaxAttempts, 1<<20))
		}
		if p.InitialInterval > 0 {
			retry.InitialInterval = p.InitialInterval.Std()
		}
		if p.BackoffCoefficient > 0 {
			retry.BackoffCoefficient = p.BackoffCoefficient
		}
		if p.MaxInterval > 0 {
			retry.MaximumInterval = p.MaxInterval.Std()
		}
		// Temporal refuses a policy whose longest wait is below its first.
		retry.MaximumInterval = max(retry.MaximumInterval, retry.InitialInterval)
	}
	return timeout, retry
}
