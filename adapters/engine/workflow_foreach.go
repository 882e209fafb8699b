package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// holdsSlot reports whether a node of type t takes one of the execution's
// nodes in flight while it runs. A DELAY waits on a timer; a FOR_EACH
// holds none itself, its iterations each take one; a WAIT_FOR_EVENT waits
// on a signal. A SUB_WORKFLOW holds one while its child runs, inside it
// (executionRun.nodesInFlight), and a TEMPORAL_WORKFLOW while the team's
// workflow runs.
func holdsSlot(t domain.NodeType) bool {
	return !t.RunByWorkflow() || t == domain.NodeSubWorkflow || t == domain.NodeTemporalWorkflow
}

// launchComposite starts the node types the workflow runs itself rather
// than as one activity, and reports whether n was one of them.
func (r *executionRun) launchComposite(sel workflow.Selector, n domain.Node, in RunNodeInput) bool {
	switch n.Type {
	case domain.NodeForEach:
		r.launchForEach(sel, n)
		return true
	case domain.NodeWaitForEvent:
		r.launchWait(sel, n)
		return true
	case domain.NodeSubWorkflow:
		r.launchSub(sel, n)
		return true
	case domain.NodeTemporalWorkflow:
		r.launchTemporal(sel, n)
		return true
	}
	return false
}

// launchForEach runs a FOR_EACH: it resolves the items in the workflow
// (templates are pure), refuses an array past the plan's cap, then runs
// one iteration per element, each as the node it templates, each waiting
// for one of the execution's nodes in flight, and outputs their outputs in
// input order. The first failed iteration fails the node: no further one
// starts, those in flight end and are recorded.
func (r *executionRun) launchForEach(sel workflow.Selector, n domain.Node) {
	started := r.now()
	f, outcome := workflow.NewFuture(r.ctx)
	sel.AddFuture(f, func(f workflow.Future) {
		var out json.RawMessage
		err := f.Get(r.ctx, &out)
		ended := r.now()
		r.last = nodeOutcome{node: n, output: out, err: err, started: &started, ended: &ended, attempt: 1}
	})
	cfg, items, err := r.forEachItems(n)
	var in RunNodeInput
	if err == nil {
		// Each iteration carries what its template reads, taken once
		// here, and its element: not the FOR_EACH's own input, which
		// holds the whole array.
		in, err = r.readsInput(cfg.Node.Iteration(n.Key, 0))
	}
	r.started(n)
	if err != nil {
		outcome.SetError(temporal.NewNonRetryableApplicationError(err.Error(), "invalid_input", nil))
		return
	}
	r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: 1, StartedAt: &started})
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		out, err := r.iterate(ctx, n, cfg, in, items)
		outcome.Set(out, err)
	})
}

// forEachItems decodes n's config and resolves its items against what the
// run has, checking them against the plan's cap.
func (r *executionRun) forEachItems(n domain.Node) (domain.ForEachConfig, []any, error) {
	cfg, err := domain.DecodeForEachConfig(n.Config)
	if err != nil {
		return cfg, nil, err
	}
	v, err := domain.ResolveJSON(cfg.Items, domain.TemplateContext{
		Input: r.input, Steps: r.outputs, ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID,
		Budget: domain.NewTemplateBudget(r.limits.PayloadLimit),
	})
	if err != nil {
		return cfg, nil, fmt.Errorf("config.items: %w", err)
	}
	limit := r.limits.ForEachItems[r.in.Plan]
	if limit <= 0 {
		limit = domain.DefaultForEachItems()[r.in.Plan]
	}
	items, err := domain.ForEachItems(v, limit)
	return cfg, items, err
}

// iterate runs the iterations of FOR_EACH n, at most as many at once as
// the execution has nodes in flight left (r.busy), and encodes their
// outputs as one array.
func (r *executionRun) iterate(ctx workflow.Context, n domain.Node, cfg domain.ForEachConfig, in RunNodeInput, items []any) (json.RawMessage, error) {
	capacity := r.nodesInFlight()
	results := make([]json.RawMessage, len(items))
	var failure error
	launched, done := 0, 0
	for i, item := range items {
		if err := workflow.Await(ctx, func() bool { return r.busy < capacity || failure != nil }); err != nil || failure != nil {
			break
		}
		it, err := r.iterationInput(n, cfg, in, i, item)
		if err != nil {
			failure = err
			break
		}
		if err := r.historyRoom(fmt.Sprintf("iteration %d of %s", i, n.Key), it.size); err != nil {
			failure = err
			break
		}
		if err := r.takeTaskRoom(ctx, it); err != nil {
			failure = err
			break
		}
		r.busy++
		launched++
		workflow.Go(ctx, func(ctx workflow.Context) {
			out, err := r.runIteration(ctx, it)
			r.busy--
			done++
			r.flushAsTheyEnd()
			if err != nil {
				if failure == nil {
					failure = fmt.Errorf("iteration %d (%s) failed: %s", it.Iteration.Index, it.Node.Key, errorMessage(err))
				}
				return
			}
			results[it.Iteration.Index] = out
		})
	}
	wait, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(wait, func() bool { return done == launched })
	if ctx.Err() != nil {
		return nil, temporal.NewCanceledError("execution cancelled")
	}
	if failure != nil {
		return nil, temporal.NewNonRetryableApplicationError(failure.Error(), "iteration_failed", nil)
	}
	out, err := json.Marshal(results)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("iteration outputs: "+err.Error(), "invalid_output", nil)
	}
	if len(out) > r.limits.PayloadLimit {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the %d iterations' outputs are %d bytes together, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(items), len(out), r.limits.PayloadLimit),
			"payload_too_large", nil)
	}
	return out, nil
}

// iterationInput is the activity input of iteration i: what the node
// template reads (in, from readsInput), with the template as the node,
// recorded as <key>[i], and the element to read; a pure iteration's
// output is given the room of what it carries (withOutputRoom), as a pure
// node's is.
func (r *executionRun) iterationInput(n domain.Node, cfg domain.ForEachConfig, in RunNodeInput, i int, item any) (RunNodeInput, error) {
	raw, err := json.Marshal(item)
	if err != nil {
		return RunNodeInput{}, fmt.Errorf("item %d: %w", i, err)
	}
	in.Node = cfg.Node.Iteration(n.Key, i)
	in.Iteration = &IterationInput{Index: i, Item: raw}
	in.size += len(raw)
	return r.withOutputRoom(in), nil
}

// takeTaskRoom takes the room in the current workflow task that
// activity input in needs (fitsTask). While it does not fit, it waits for
// the pure nodes running in the task to end (each turns its reservation
// into its result's size, which may leave room), and ends the task (a 1
// ms timer) only when none is left to end: then the task's reply itself
// is full.
func (r *executionRun) takeTaskRoom(ctx workflow.Context, in RunNodeInput) error {
	for r.observeTask(); !r.fitsTask(in.Node, in); r.observeTask() {
		if reserved := r.task.reserved; reserved > 0 {
			if err := workflow.Await(ctx, func() bool { return r.task.reserved < reserved }); err != nil {
				return err
			}
			continue
		}
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
		r.task.restart()
	}
	return nil
}

// runIteration runs one iteration as its node type runs: a pure node as a
// local activity, recorded by the workflow; an HTTP node as an activity on
// the external-API queue, within the workspace's share, recording itself;
// under forEachPoliciesChange each with the template's policies, and an
// HTTP one through its host's turn as launchPrepared runs a node. A
// failure or cancellation is recorded here.
func (r *executionRun) runIteration(ctx workflow.Context, in RunNodeInput) (json.RawMessage, error) {
	n := in.Node
	started := r.now()
	var output json.RawMessage
	var err error
	timeout, retry := r.attemptPolicy(n)
	if isPure(n.Type) {
		var out PureNodeOutput
		out, err = r.awaitPure(ctx, r.startPure(ctx, in, timeout, retry))
		if err == nil {
			began, ended := causalSpan(started, out.StartedAt, out.CompletedAt)
			r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeCompleted, Attempt: out.Attempt,
				Output: out.Output, StartedAt: began, CompletedAt: ended})
		}
		output = out.Output
	} else {
		var out RunNodeOutput
		err = r.runActivityNode(ctx, n, r.activityOptions(n, timeout, retry), in).Get(ctx, &out)
		output = out.Output
	}
	switch {
	case err == nil:
	case temporal.IsCanceledError(err) && r.ctx.Err() != nil:
		r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeCancelled, Error: "execution cancelled", StartedAt: &started})
	default:
		r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeFailed, Error: errorMessage(err), StartedAt: &started})
	}
	return output, err
}
