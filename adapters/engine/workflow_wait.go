package engine

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// EventSignalName is the Temporal signal an event named name is sent as,
// one channel per name, so that an event sent before its node starts waits
// in its channel (Temporal keeps a workflow's signals for the run's life)
// and a node reads only its own.
func EventSignalName(name string) string { return "sluice-event:" + name }

// EventSignal is an event's signal payload.
type EventSignal struct {
	Payload json.RawMessage
}

// waitOutcome is how a wait ended: Came with the event's payload, or not
// (it timed out onto the node's "when": false edges).
type waitOutcome struct {
	Output json.RawMessage
	Came   bool
}

// completeIn feeds a completed node to the scheduler: on the branch its
// outcome chose (WAIT_FOR_EVENT), else with its output.
func completeIn(sched *domain.Scheduler, o nodeOutcome, out any) ([]string, error) {
	if o.branch != nil {
		return sched.CompletedOnBranch(o.node.Key, *o.branch)
	}
	return sched.Completed(o.node.Key, out)
}

// launchWait runs a WAIT_FOR_EVENT: it records the node RUNNING and waits,
// on a coroutine holding no slot, for the first signal of its event or
// its timeout, whichever comes first. A timeout takes the node's
// "when": false edges, or fails it when there are none. A cancelled
// execution ends the wait at once.
func (r *executionRun) launchWait(sel workflow.Selector, n domain.Node) {
	started := r.now()
	f, outcome := workflow.NewFuture(r.ctx)
	sel.AddFuture(f, func(f workflow.Future) {
		var w waitOutcome
		err := f.Get(r.ctx, &w)
		ended := r.now()
		r.last = nodeOutcome{node: n, output: w.Output, err: err, started: &started, ended: &ended, attempt: 1, branch: &w.Came}
	})
	r.started(n)
	cfg, err := domain.DecodeWaitForEventConfig(n.Config)
	if err != nil {
		outcome.SetError(temporal.NewNonRetryableApplicationError(err.Error(), "invalid_config", nil))
		return
	}
	r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: 1, StartedAt: &started})
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		events := workflow.GetSignalChannel(ctx, EventSignalName(cfg.Event))
		timerCtx, stopTimer := workflow.WithCancel(ctx)
		defer stopTimer()
		var (
			out  waitOutcome
			werr error
		)
		s := workflow.NewSelector(ctx)
		s.AddReceive(events, func(c workflow.ReceiveChannel, _ bool) {
			var ev EventSignal
			c.Receive(ctx, &ev)
			out = waitOutcome{Output: ev.Payload, Came: true}
			if len(out.Output) == 0 {
				out.Output = json.RawMessage("null")
			}
			if err := r.historyRoom(fmt.Sprintf("taking event %q", cfg.Event), 0); err != nil {
				werr = err
			} else if len(out.Output) > r.limits.PayloadLimit {
				werr = temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"event %q's payload is %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", cfg.Event, len(out.Output), r.limits.PayloadLimit),
					"payload_too_large", nil)
			}
		})
		s.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
			werr = temporal.NewCanceledError("execution cancelled")
		})
		if wait := cfg.Timeout.Std(); wait > 0 {
			s.AddFuture(workflow.NewTimer(timerCtx, wait), func(f workflow.Future) {
				switch {
				case f.Get(ctx, nil) != nil:
					werr = temporal.NewCanceledError("execution cancelled")
				case (domain.Graph{Edges: r.edges}).HasBranch(n.Key, false):
					out = waitOutcome{Output: json.RawMessage("null")}
				default:
					werr = temporal.NewNonRetryableApplicationError(fmt.Sprintf(
						"no event %q came within %s, and the node has no \"when\": false edge to take", cfg.Event, wait), "event_timeout", nil)
				}
			})
		}
		s.Select(ctx)
		outcome.Set(out, werr)
	})
}
