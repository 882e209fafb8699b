package engine

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// runOutbound runs an HTTP node under its workspace's limits for the host
// it calls. Before each call it takes the host's turn (a local activity on
// the shared state in Postgres), waiting on a durable timer, holding no
// worker slot, for its slot of the host's rate or the end of the host's
// pause. It then runs the node as before (within the workspace's share
// when there is one), its activity admitting the call at the rate just
// before it goes: one refused there (its timer fired late, beside others)
// waits again on a timer and runs again, spending no attempt.
//
// An answer with a Retry-After is a round: OutboundPauses.Wait decides
// how long it waits (at least the floor, so a "Retry-After: 0" cannot spin
// the node) or fails the node, naming the host, its status and the bound,
// once the node's rounds or their waits together pass their bounds. A
// round pauses the host for the workspace and sends the node back to wait
// for its turn, a new activity whose attempts start again, since no
// attempt was at fault. Each call, and each wait, asks the history budget
// first (historyRoom). The future resolves as the activity's would.
func (r *executionRun) runOutbound(n domain.Node, opts workflow.ActivityOptions, in RunNodeInput) workflow.Future {
	f, outcome := workflow.NewFuture(r.ctx)
	pauses := r.limits.OutboundPauses.WithDefaults()
	in.OutboundAdmit = true
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		var waited time.Duration
		for round, needTurn := 0, true; ; {
			if needTurn {
				if err := r.waitForTurn(ctx, in); err != nil {
					outcome.SetError(err)
					return
				}
			}
			if round > 0 {
				// The node's input goes to Temporal again, in a new
				// activity: the history and the task must have room.
				if err := r.historyRoom(fmt.Sprintf("calling again for node %s after Retry-After round %d", in.Node.Key, round), in.size); err != nil {
					outcome.SetError(err)
					return
				}
				if err := r.takeTaskRoom(ctx, in); err != nil {
					outcome.SetError(err)
					return
				}
			}
			var out RunNodeOutput
			var err error
			if r.share > 0 {
				out, err = r.inShare(ctx, n, opts, in)
			} else {
				err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), runNodeActivity, in).Get(ctx, &out)
			}
			if wait, ok := outboundWaitOf(err); ok {
				// Not admitted as it went: it keeps its turn and goes
				// again after the wait.
				needTurn = false
				if full := r.historyRoom("waiting for the rate of node "+in.Node.Key+"'s host", 0); full != nil {
					outcome.SetError(full)
					return
				}
				if err = workflow.Sleep(ctx, wait); err != nil {
					outcome.SetError(err)
					return
				}
				continue
			}
			needTurn = true
			ra, ok := retryAfterOf(err)
			if !ok {
				outcome.Set(out, err)
				return
			}
			round++
			wait, exhausted := pauses.Wait(domain.RetryAfterRound{Host: ra.Host, Status: ra.Status, Asked: ra.Wait, Round: round, Waited: waited})
			if exhausted != nil {
				outcome.SetError(temporal.NewNonRetryableApplicationError(exhausted.Error(), "retry_after_exhausted", nil))
				return
			}
			waited += wait
			var shared bool
			pause := OutboundPauseInput{WorkspaceID: r.in.WorkspaceID, Host: ra.Host, Wait: wait, HostsMax: pauses.HostsMax}
			if err := workflow.ExecuteLocalActivity(bookkeeping(ctx), pauseOutboundHostActivity, pause).Get(ctx, &shared); err != nil {
				outcome.SetError(err)
				return
			}
			if !shared {
				// The workspace has its whole bound of hosts paused: this
				// node still waits, on its own.
				if err := workflow.Sleep(ctx, wait); err != nil {
					outcome.SetError(err)
					return
				}
			}
		}
	})
	return f
}

// waitForTurn takes the node's turn at its host, sleeping on a durable
// timer for as long as the shared state says each time it has none: until
// the slot of the host's rate it reserved, or the end of the host's pause.
func (r *executionRun) waitForTurn(ctx workflow.Context, in RunNodeInput) error {
	ask := OutboundTurnInput{Run: in}
	for {
		if err := r.historyRoom("waiting for node "+in.Node.Key+"'s turn at its host", 0); err != nil {
			return err
		}
		var turn OutboundTurnOutput
		if err := workflow.ExecuteLocalActivity(bookkeeping(ctx), outboundTurnActivity, ask).Get(ctx, &turn); err != nil {
			return err
		}
		if turn.Wait <= 0 {
			return nil
		}
		ask.HoldsSlot = turn.Reserved
		if err := workflow.Sleep(ctx, turn.Wait); err != nil {
			return err
		}
	}
}
