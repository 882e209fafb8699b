package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// WithOutboundMetrics observes the outbound gate's waits, pauses and
// refusals into m.
func WithOutboundMetrics(m *OutboundMetrics) ActivitiesOption {
	return func(a *Activities) { a.outboundMetrics = m }
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
// to fail as it would have (worker.Runs.OutboundTurn lets every node go when
// no gate is set).
func (a *Activities) OutboundTurn(ctx context.Context, in OutboundTurnInput) (OutboundTurnOutput, error) {
	host, ok := a.targetHost(in.Run)
	if !ok {
		return OutboundTurnOutput{}, nil
	}
	ws, err := domain.ParseID(in.Run.WorkspaceID)
	if err != nil {
		return OutboundTurnOutput{}, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	turn, err := a.runs.OutboundTurn(ctx, ws, host, in.HoldsSlot)
	if err != nil {
		return OutboundTurnOutput{}, err
	}
	a.outboundMetrics.turnWaited(turn.Wait, turn.Reserved)
	return OutboundTurnOutput{Wait: turn.Wait, Reserved: turn.Reserved}, nil
}

// outboundWaitErrorType is the application error type of an HTTP node
// whose call was not admitted at its host's rate just before it went; its
// details are the time.Duration to wait.
const outboundWaitErrorType = "outbound_wait"

// admitOutbound admits the node's call at its host just before it goes,
// when the workflow asks for it: a call refused ends the activity with a
// non-retryable outboundWaitErrorType error, which the workflow waits out
// on a timer before it runs the node again, spending no attempt.
func (a *Activities) admitOutbound(ctx context.Context, in RunNodeInput) error {
	if !in.OutboundAdmit {
		return nil
	}
	host, ok := a.targetHost(in)
	if !ok {
		return nil
	}
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	wait, err := a.runs.AdmitOutboundCall(ctx, ws, host)
	if err != nil || wait <= 0 {
		return err
	}
	a.outboundMetrics.sendRefused()
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("waiting %s for the rate of %s", wait, host), outboundWaitErrorType, nil, wait)
}

// targetHost is the host the node calls, when its executor can tell.
func (a *Activities) targetHost(in RunNodeInput) (string, bool) {
	target, ok := a.executors[in.Node.Type].(ports.OutboundTarget)
	if !ok {
		return "", false
	}
	tc, err := templateContext(in)
	if err != nil {
		return "", false
	}
	return target.TargetHost(ports.NodeRun{Node: in.Node, Context: tc})
}

// outboundWaitOf reads a node activity's error as a refused admission.
func outboundWaitOf(err error) (time.Duration, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != outboundWaitErrorType {
		return 0, false
	}
	var wait time.Duration
	if app.Details(&wait) != nil {
		return 0, false
	}
	return wait, true
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
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return false, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	shared, err := a.runs.PauseOutboundHost(ctx, ws, in.Host, in.Wait, in.HostsMax)
	if err != nil {
		return false, err
	}
	a.outboundMetrics.paused(shared)
	return shared, nil
}

// retryAfterErrorType is the application error type of a node whose
// upstream answered with a Retry-After; its details are a retryAfterDetail.
const retryAfterErrorType = "upstream_retry_after"

// retryAfterDetail is what the workflow needs of a Retry-After answer.
type retryAfterDetail struct {
	Host   string
	Status int `json:",omitempty"`
	Wait   time.Duration
}

// retryAfterApplicationError turns an executor's RetryAfterError into a
// non-retryable activity error: Temporal spends no attempt on it, the
// workflow waits and runs the node again. Nil for any other error.
func retryAfterApplicationError(err error) error {
	var ra *ports.RetryAfterError
	if !errors.As(err, &ra) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), retryAfterErrorType, nil, retryAfterDetail{Host: ra.Host, Status: ra.Status, Wait: ra.Wait})
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
