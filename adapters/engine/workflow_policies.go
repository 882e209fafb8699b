package engine

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/domain"
)

// attemptPolicy returns the timeout of one attempt of n and its retry
// policy: the node's own where it sets them, the worker's elsewhere.
func (r *executionRun) attemptPolicy(n domain.Node) (time.Duration, *temporal.RetryPolicy) {
	timeout, retry := nodeTimeout(n), r.nodeRetry()
	if n.Retry == nil && n.Timeout == 0 {
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
