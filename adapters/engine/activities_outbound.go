package engine

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// WithOutboundGate holds HTTP nodes to their workspace's host limits and
// pauses in gate.
func WithOutboundGate(gate ports.OutboundGate) ActivitiesOption {
	return func(a *Activities) { a.outbound = gate }
}

// OutboundTurnInput asks for an HTTP node's turn at its host.
type OutboundTurnInput struct {
	Run RunNodeInput
	// HoldsSlot is set when the node's last ask reserved a slot of the
	// host's rate, which it now only checks the host's pause for.
	HoldsSlot bool
}

// OutboundTurnOutput is how long the node waits before it asks again, and
// whether it then holds a slot of the host's rate; zero Wait: it goes.
type OutboundTurnOutput struct {
	Wait     time.Duration
	Reserved bool
}

// OutboundTurn names the host the node calls and asks for its turn. A
// node whose host cannot be told (its URL fails to resolve) goes at once,
// to fail as it would have; so does every node when no gate is set.
func (a *Activities) OutboundTurn(ctx context.Context, in OutboundTurnInput) (OutboundTurnOutput, error) {
	target, ok := a.executors[in.Run.Node.Type].(ports.OutboundTarget)
	if !ok || a.outbound == nil {
		return OutboundTurnOutput{}, nil
	}
	tc, err := templateContext(in.Run)
	if err != nil {
		return OutboundTurnOutput{}, nil
	}
	host, ok := target.TargetHost(ports.NodeRun{Node: in.Run.Node, Context: tc})
	if !ok {
		return OutboundTurnOutput{}, nil
	}
	ws, err := domain.ParseID(in.Run.WorkspaceID)
	if err != nil {
		return OutboundTurnOutput{}, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	turn, err := a.outbound.TakeOutboundTurn(ctx, ws, host, in.HoldsSlot)
	return OutboundTurnOutput{Wait: turn.Wait, Reserved: turn.Reserved}, err
}

// OutboundPauseInput pauses a workspace's calls to a host.
type OutboundPauseInput struct {
	WorkspaceID string
	Host        string
	Wait        time.Duration
	// HostsMax is how many hosts the workspace may have paused at once
	// (domain.OutboundPauses.HostsMax).
	HostsMax int
}

// PauseOutboundHost pauses the host for the workspace, reporting false
// when the workspace has HostsMax other hosts paused (or no gate is set):
// the node then waits on its own.
func (a *Activities) PauseOutboundHost(ctx context.Context, in OutboundPauseInput) (bool, error) {
	if a.outbound == nil {
		return false, nil
	}
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return false, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	return a.outbound.PauseOutboundHost(ctx, ws, in.Host, in.Wait, in.HostsMax)
}

// retryAfterErrorType is the application error type of a node whose
// upstream answered with a Retry-After; its details are a retryAfterDetail.
const retryAfterErrorType = "upstream_retry_after"

// retryAfterDetail is what the workflow needs of a Retry-After answer.
type retryAfterDetail struct {
	Host string
	Wait time.Duration
}

// retryAfterApplicationError turns an executor's RetryAfterError into a
// non-retryable activity error: Temporal spends no attempt on it, the
// workflow waits and runs the node again. Nil for any other error.
func retryAfterApplicationError(err error) error {
	var ra *ports.RetryAfterError
	if !errors.As(err, &ra) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), retryAfterErrorType, nil, retryAfterDetail{Host: ra.Host, Wait: ra.Wait})
}

// retryAfterOf reads a node activity's error as a Retry-After answer.
func retryAfterOf(err error) (retryAfterDetail, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != retryAfterErrorType {
		return retryAfterDetail{}, false
	}
	var d retryAfterDetail
	if app.Details(&d) != nil || d.Host == "" {
		return retryAfterDetail{}, false
	}
	return d, true
}
