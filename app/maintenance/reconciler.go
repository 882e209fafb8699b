package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Reconciler records the real outcome of RUNNING executions whose workflow
// closed or vanished without telling Sluice (terminated by an operator,
// or by Temporal at one of its limits, say), freeing their slots. Its walk
// runs in one process at a time under the reconcileExecutions lease; its
// close watch (WatchClosed), which records terminations within seconds,
// under the watchClosedWorkflows lease. Each of its questions to Temporal
// waits at most askTimeout (askTemporal), and each of its passes stops at
// the first answer that Temporal is unavailable, leaving what it did not
// reach for its next run; the walk goes past one execution or child
// Temporal does not answer about while it answers otherwise (passOver).
type Reconciler struct {
	store      ports.DispatchStore
	executions ports.ExecutionStore
	engine     ports.WorkflowEngine
	breaker    *dispatch.Breaker
	olderThan  time.Duration
	// askTimeout bounds each question to Temporal (askTemporal), as stale
	// recovery's are bounded.
	askTimeout time.Duration
	pageSize   int
	log        *slog.Logger
	loop       maintenance

	// cursor is where the walk resumes; only the loop touches it.
	cursor ports.ExecutionCursor
	// stuckAfter is how long a RUNNING execution's workflow may wait for
	// a worker to pick it up before it is failed; 0 never fails one.
	stuckAfter time.Duration
	// watch, when set, lists the workflows lately closed outside Sluice
	// for WatchClosed, which runs in closeWatch's loop; watched are the
	// executions its last turn recorded, which the next (its window
	// overlapping) skips.
	watch      ports.ClosedWorkflowWatch
	closeWatch maintenance
	watched    map[domain.ID]bool
	// pickedUp are the executions found picked up by a worker, which
	// need no further look: this walk's and the last one's, so the set
	// holds only executions still RUNNING.
	pickedUp, pickedUpLastWalk map[domain.ID]bool
	// children, when set, checks and ends the team workflows that
	// TEMPORAL_WORKFLOW nodes started, under the same rule;
	// childrenPickedUp(LastWalk) are the children found picked up, as
	// pickedUp are the executions, by workflow and run id.
	children                                   ports.ChildWorkflowEngine
	childrenPickedUp, childrenPickedUpLastWalk map[string]bool

	// unanswered is the walk's rule for an execution or child Temporal
	// does not answer about (passOver), and its streaks of walks gone
	// past them.
	unanswered *unansweredSubjects
}

// FailStuckStartsAfter has the reconciler fail, and free the slot of, an
// execution whose workflow no worker has picked up after d
// (SLUICE_STUCK_START_AFTER): Temporal has no schedule-to-start timeout
// for a workflow's first task, so such a run would hold its slot for ever.
// Since the reconciler only looks at executions older than its olderThan,
// the effective limit is the longer of the two.
func (r *Reconciler) FailStuckStartsAfter(d time.Duration) *Reconciler {
	r.stuckAfter = d
	return r
}

// FailStuckChildren applies the stuck-start rule (FailStuckStartsAfter)
// to the team workflows that the walk's running executions started as
// TEMPORAL_WORKFLOW children: a child no worker picked up within the same
// time, on a task queue no worker polls, is ended with a reason naming the
// queue and the rule, and its run fails the node with that reason and
// ends by Sluice. Without it such a child would hold the run's slot until
// its execution timeout.
func (r *Reconciler) FailStuckChildren(children ports.ChildWorkflowEngine) *Reconciler {
	r.children = children
	return r
}

// closeWatchWindow is how far back each look of the close watch reaches:
// past its interval, for the lag of Temporal's visibility.
const closeWatchWindow = time.Minute

// WatchClosed has the reconciler also look, every schedule.Interval
// (SLUICE_CLOSE_WATCH_INTERVAL) under its own lease, for workflows that
// closed outside Sluice within the last minute (terminated by the server
// at one of its limits, or by an operator), and record their end at once
// (RunCloseWatch): the walk of RUNNING executions reaches them only once
// they are older than olderThan, a minute and more later.
func (r *Reconciler) WatchClosed(watch ports.ClosedWorkflowWatch, schedule JobSchedule) *Reconciler {
	r.watch = watch
	r.closeWatch = maintenance{name: CloseWatchLeaseName, lease: r.loop.lease, schedule: schedule, metrics: r.loop.metrics, log: r.log, job: r.runCloseWatch}
	return r
}

// RunCloseWatch runs the close watch on its schedule until ctx ends; it
// returns at once when WatchClosed was not set.
func (r *Reconciler) RunCloseWatch(ctx context.Context) {
	if r.watch == nil {
		return
	}
	r.closeWatch.run(ctx)
}

// runCloseWatch is one turn of the close watch, skipped while the
// breaker is open.
func (r *Reconciler) runCloseWatch(ctx context.Context) {
	if !r.breaker.Closed() {
		return
	}
	if n, err := r.RecordClosed(ctx, time.Now().Add(-closeWatchWindow)); err != nil {
		r.log.Error("recording workflows closed outside Sluice failed", "error", err)
	} else if n > 0 {
		r.log.Info("recorded workflows closed outside Sluice", "count", n)
	}
}

// RecordClosed records the end of the executions whose workflow closed
// outside Sluice since since (at most a page of them), naming how and
// why, and returns how many were still RUNNING. Ending them ends their
// RUNNING node records too and frees their slots. The listing is one
// question, waiting at most askTimeout: when Temporal stops answering
// partway (unavailable, or the deadline passed while it read the reasons),
// the workflows listed before are recorded and the outage is the error;
// the rest are in the next look's window, or reached by the walk.
func (r *Reconciler) RecordClosed(ctx context.Context, since time.Time) (int, error) {
	var closed []ports.ClosedWorkflow
	listErr := askTemporal(ctx, r.askTimeout, func(ctx context.Context) (err error) {
		closed, err = r.watch.ClosedOutsideSluice(ctx, since, r.pageSize)
		return err
	})
	n := 0
	seen := make(map[domain.ID]bool, len(closed))
	for _, c := range closed {
		seen[c.ExecutionID] = true
		if r.watched[c.ExecutionID] {
			continue
		}
		status, msg, _ := finalStatus(c.State)
		if c.Reason != "" {
			msg += ": " + c.Reason
		}
		found, err := queue.FinishExecution(ctx, r.executions, r.log, c.ExecutionID, status, msg, domain.DefaultRecordValueMax)
		if err != nil {
			return n, err
		}
		if found {
			n++
			r.log.Warn("recorded a workflow closed outside Sluice", "execution_id", c.ExecutionID, "workflow_state", c.State, "reason", c.Reason)
		}
	}
	r.watched = seen
	return n, listErr
}

// NewReconciler builds the reconciler. It asks Temporal only about
// executions RUNNING for longer than olderThan, pageSize of them per run
// (500 when not positive), and waits at most askTimeout for each answer
// (the dispatcher's StartTimeout, as stale recovery does).
func NewReconciler(store ports.DispatchStore, executions ports.ExecutionStore, engine ports.WorkflowEngine, breaker *dispatch.Breaker, lease ports.Lease,
	olderThan, askTimeout time.Duration, pageSize int, schedule JobSchedule, metrics *ReconcilerMetrics, leaseMetrics *dispatch.LeaseMetrics, log *slog.Logger) *Reconciler {
	if pageSize <= 0 {
		pageSize = 500
	}
	r := &Reconciler{store: store, executions: executions, engine: engine, breaker: breaker, olderThan: olderThan, askTimeout: askTimeout,
		pageSize: pageSize, log: log}
	r.unanswered = newUnansweredSubjects(engine, breaker, askTimeout, pageSize, metrics.UnansweredWorkflows, metrics.UnansweredWorkflowsNow,
		"the reconciler goes past it, leaving it RUNNING, and asks again each walk", log)
	r.loop = maintenance{name: ReconcilerLeaseName, lease: lease, schedule: schedule, metrics: leaseMetrics, log: log, job: r.run,
		elsewhere: r.unanswered.runElsewhere}
	return r
}

// Run reconciles a page on the schedule until ctx ends.
func (r *Reconciler) Run(ctx context.Context) { r.loop.run(ctx) }

// run is one scheduled run: skipped while the breaker is open, since the
// reconciler must ask Temporal and waits for the probe that closes it.
func (r *Reconciler) run(ctx context.Context) {
	if !r.breaker.Closed() {
		return
	}
	if n, err := r.Reconcile(ctx); err != nil {
		r.log.Error("reconciling stuck executions failed", "error", err)
	} else if n > 0 {
		r.log.Info("reconciled stuck executions", "count", n)
	}
}

// Reconcile checks one page of RUNNING executions past olderThan against
// Temporal and records the real final status of those whose workflow is
// closed or missing. Pages follow each other across calls in (started_at,
// id) order and wrap around at the end, so every such execution is checked
// within ceil(total/pageSize) calls however many long runs are older.
// Executions whose item is still CLAIMED are stale recovery's business and
// are not returned by the store. A page stopped by an outage (Temporal
// unavailable, or a question past its deadline, and passOver finding it
// away) is walked again by the next call, from where this one began: what
// was recorded before the outage is written, and what the walk did not
// reach (the rest of the page, its runs' children) is neither skipped nor
// marked. An execution or child gone past is left RUNNING and asked about
// again by the next walk.
func (r *Reconciler) Reconcile(ctx context.Context) (int, error) {
	running, err := r.store.RunningAdmittedBefore(ctx, r.olderThan, r.cursor, r.pageSize)
	if err != nil {
		return 0, err
	}
	n, err := r.reconcilePage(ctx, running)
	if errors.Is(err, ports.ErrEngineUnavailable) {
		return n, err
	}
	if len(running) < r.pageSize {
		r.cursor = ports.ExecutionCursor{}
		r.pickedUpLastWalk, r.pickedUp = r.pickedUp, nil
		r.childrenPickedUpLastWalk, r.childrenPickedUp = r.childrenPickedUp, nil
	} else {
		last := running[len(running)-1]
		r.cursor = ports.ExecutionCursor{AdmittedAt: last.AdmittedAt, ID: last.ID}
	}
	return n, err
}

// reconcilePage checks the executions of one page in order, then the
// children of those still running (endAbandonedChildren), and returns how
// many it recorded. A question Temporal did not answer either stops it,
// returning the outage, or is gone past (passOver); another failure to ask
// leaves that execution for the next walk.
func (r *Reconciler) reconcilePage(ctx context.Context, running []domain.Execution) (n int, err error) {
	r.unanswered.startRun()
	defer func() { r.unanswered.endRun(err == nil) }()
	var alive []domain.ID
	for _, e := range running {
		recorded, stillRunning, err := r.reconcileExecution(ctx, e)
		if errors.Is(err, ports.ErrEngineUnavailable) {
			if stop := r.unanswered.passOver(ctx, e.ID.String(), err, "execution_id", e.ID); stop != nil {
				return n, stop
			}
			continue
		}
		if err != nil {
			return n, err
		}
		r.unanswered.answered(e.ID.String())
		if recorded {
			n++
		}
		if stillRunning {
			alive = append(alive, e.ID)
		}
	}
	return n, r.endAbandonedChildren(ctx, alive)
}

// reconcileExecution checks e against Temporal and records its real final
// status when its workflow is closed or missing, or failed by the
// stuck-start rule. It reports whether it recorded e, and whether e's
// workflow is still running (its children are then checked). An unanswered
// question is its error (ports.ErrEngineUnavailable), as is a failure to
// record; another failure to ask is logged and leaves e for the next walk.
func (r *Reconciler) reconcileExecution(ctx context.Context, e domain.Execution) (recorded, stillRunning bool, err error) {
	var state ports.WorkflowState
	err = askTemporal(ctx, r.askTimeout, func(ctx context.Context) (err error) {
		state, err = r.engine.DescribeWorkflow(ctx, e.ID)
		return err
	})
	if err != nil {
		if errors.Is(err, ports.ErrEngineUnavailable) {
			return false, false, fmt.Errorf("describing workflows: %w", err)
		}
		r.log.Warn("cannot describe execution's workflow", "execution_id", e.ID, "error", err)
		return false, false, nil
	}
	status, msg, closed := finalStatus(state)
	if state == ports.WorkflowRunning {
		if closed, msg, err = r.abandoned(ctx, e); err != nil {
			return false, false, err
		}
		status = domain.ExecutionFailed
	}
	if !closed {
		return false, state == ports.WorkflowRunning, nil
	}
	if state == ports.WorkflowCompleted {
		// A DAG that failed or was cancelled also ends its workflow
		// normally; the status it recorded is in its result.
		err = askTemporal(ctx, r.askTimeout, func(ctx context.Context) (err error) {
			status, msg, err = r.engine.WorkflowResult(ctx, e.ID)
			return err
		})
		if errors.Is(err, ports.ErrEngineUnavailable) {
			return false, false, fmt.Errorf("reading a completed workflow's result: %w", err)
		}
		if err != nil {
			r.log.Warn("cannot read a completed workflow's result", "execution_id", e.ID, "error", err)
			return false, false, nil
		}
	}
	found, err := queue.FinishExecution(ctx, r.executions, r.log, e.ID, status, msg, domain.DefaultRecordValueMax)
	if err != nil {
		return false, false, err
	}
	if found {
		r.log.Warn("reconciled stuck execution", "execution_id", e.ID, "workflow_state", state, "status", status)
	}
	return found, false, nil
}

// abandoned terminates the workflow of e when it has waited past
// stuckAfter for a worker that is not there, and returns the failure to
// record, naming the task queue. An unavailable engine is an error (the
// walk stops); another failure to ask leaves e for the next run. Either
// way e is not recorded: a termination Temporal did not confirm (it may
// have happened, past the deadline) is recorded by the walk or the close
// watch once Temporal says the workflow was terminated.
func (r *Reconciler) abandoned(ctx context.Context, e domain.Execution) (bool, string, error) {
	if !r.waitedPastStuckStart(e.AdmittedAt) {
		return false, "", nil
	}
	if r.pickedUp[e.ID] || r.pickedUpLastWalk[e.ID] {
		r.notePickedUp(e.ID)
		return false, "", nil
	}
	var pickup ports.WorkflowPickup
	err := askTemporal(ctx, r.askTimeout, func(ctx context.Context) (err error) {
		pickup, err = r.engine.WorkflowPickup(ctx, e.ID)
		return err
	})
	if err == nil && pickup.PickedUp {
		r.notePickedUp(e.ID)
	}
	if err == nil && pickup.Abandoned() {
		msg := fmt.Sprintf("no worker picked up the execution on task queue %q within %s (SLUICE_STUCK_START_AFTER): "+
			"is a worker polling it, with the same TEMPORAL_TASK_QUEUE_PREFIX?", pickup.TaskQueue, r.stuckAfter)
		err = askTemporal(ctx, r.askTimeout, func(ctx context.Context) error {
			return r.engine.TerminateWorkflow(ctx, e.ID, msg)
		})
		if err == nil {
			return true, msg, nil
		}
	}
	if errors.Is(err, ports.ErrEngineUnavailable) {
		return false, "", fmt.Errorf("checking a stuck start: %w", err)
	}
	if err != nil {
		r.log.Warn("cannot check or end a stuck start", "execution_id", e.ID, "error", err)
	}
	return false, "", nil
}

// waitedPastStuckStart reports whether a workflow started at started has
// waited for a worker past stuckAfter, the stuck-start rule's time.
func (r *Reconciler) waitedPastStuckStart(started time.Time) bool {
	return r.stuckAfter > 0 && time.Since(started) >= r.stuckAfter
}

// endAbandonedChildren applies the stuck-start rule to the children of the
// given running executions (FailStuckChildren): each one that has waited
// past stuckAfter, unpicked on a task queue no worker polls (Abandoned), is
// ended with a reason naming the queue and the rule. A question Temporal
// did not answer either stops the walk (which walks the page again next
// run) or is gone past (passOver); another failure to ask leaves the child
// for the next walk. Ending a child is one question, its signal to the
// parent and its termination together.
func (r *Reconciler) endAbandonedChildren(ctx context.Context, executions []domain.ID) error {
	if r.children == nil || r.stuckAfter <= 0 || len(executions) == 0 {
		return nil
	}
	children, err := r.store.RunningChildren(ctx, executions)
	if err != nil {
		return fmt.Errorf("reading the runs' children: %w", err)
	}
	for _, c := range children {
		key := c.WorkflowID + "/" + c.RunID
		if !r.waitedPastStuckStart(c.StartedAt) || r.childrenPickedUp[key] || r.childrenPickedUpLastWalk[key] {
			continue
		}
		if err := r.endIfAbandoned(ctx, c, key); err != nil {
			if stop := r.unanswered.passOver(ctx, "child "+key, err, "execution_id", c.ExecutionID, "node", c.NodeKey); stop != nil {
				return stop
			}
			continue
		}
		r.unanswered.answered("child " + key)
	}
	return nil
}

// endIfAbandoned asks whether a worker picked up child c (key, its
// workflow and run id), remembers it if one did, and ends it if none will
// (Abandoned). An unanswered question is its error
// (ports.ErrEngineUnavailable); another failure to ask is logged and
// leaves the child for the next walk.
func (r *Reconciler) endIfAbandoned(ctx context.Context, c ports.RunningChild, key string) error {
	var pickup ports.WorkflowPickup
	err := askTemporal(ctx, r.askTimeout, func(ctx context.Context) (err error) {
		pickup, err = r.children.ChildPickup(ctx, c)
		return err
	})
	if err == nil && pickup.PickedUp {
		if r.childrenPickedUp == nil {
			r.childrenPickedUp = map[string]bool{}
		}
		r.childrenPickedUp[key] = true
	}
	if err == nil && pickup.Abandoned() {
		reason := fmt.Sprintf("no worker picked up workflow %s on task queue %q within %s (Sluice's stuck-start rule, SLUICE_STUCK_START_AFTER): "+
			"is the team's worker polling that queue?", c.WorkflowID, pickup.TaskQueue, r.stuckAfter)
		err = askTemporal(ctx, r.askTimeout, func(ctx context.Context) error {
			return r.children.EndAbandonedChild(ctx, c, reason)
		})
		if err == nil {
			r.log.Warn("ended a child no worker picked up", "execution_id", c.ExecutionID, "node", c.NodeKey, "task_queue", pickup.TaskQueue)
			return nil
		}
	}
	if errors.Is(err, ports.ErrEngineUnavailable) {
		return fmt.Errorf("checking a stuck child: %w", err)
	}
	if err != nil {
		r.log.Warn("cannot check or end a stuck child", "execution_id", c.ExecutionID, "node", c.NodeKey, "error", err)
	}
	return nil
}

// notePickedUp remembers, for this walk and the next, that id's workflow
// has been picked up, which is for good: it is not asked about again. One
// that waits on a polled queue (a backlog) is asked again next walk.
func (r *Reconciler) notePickedUp(id domain.ID) {
	if r.pickedUp == nil {
		r.pickedUp = map[domain.ID]bool{}
	}
	r.pickedUp[id] = true
}

// finalStatus maps a closed or missing workflow to the execution status to
// record.
func finalStatus(s ports.WorkflowState) (domain.ExecutionStatus, string, bool) {
	switch s {
	case ports.WorkflowNotFound:
		return domain.ExecutionFailed, "workflow not found in Temporal", true
	case ports.WorkflowCompleted:
		return domain.ExecutionCompleted, "", true
	case ports.WorkflowFailed:
		return domain.ExecutionFailed, "workflow failed without recording completion", true
	case ports.WorkflowCancelled:
		return domain.ExecutionCancelled, "workflow cancelled outside Sluice", true
	case ports.WorkflowTerminated:
		return domain.ExecutionFailed, "workflow terminated outside Sluice", true
	case ports.WorkflowTimedOut:
		return domain.ExecutionFailed, "workflow timed out", true
	default:
		return "", "", false
	}
}
