package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// LoadGraphInput names the definition version to run.
type LoadGraphInput struct {
	DefinitionID string
	Version      int
}

// RunNodeInput is one node to run and what its templates can see.
type RunNodeInput struct {
	ExecutionID string
	WorkspaceID string
	Node        domain.Node
	Input       json.RawMessage
	Steps       map[string]json.RawMessage
	// OutboundAdmit has the activity admit its call at the host's rate
	// just before it goes (executions under outboundHostWaitVersion).
	OutboundAdmit bool `json:",omitempty"`
	// KeyPrefix starts the node's record key in a SUB_WORKFLOW's child.
	KeyPrefix string `json:",omitempty"`
	// Iteration is set on a FOR_EACH iteration: its element and index.
	Iteration *IterationInput `json:",omitempty"`
	// OutputRoom is, for a pure node, the bytes of output the workflow
	// task awaiting it reserved (fitsTask); 0 reserves the payload limit.
	// An output larger than its room is not returned: the node reports
	// Outgrew, and the workflow runs it again (it is pure) with the
	// payload limit reserved, so that a task never carries more than it
	// reserved.
	OutputRoom int `json:",omitempty"`
	// size is the bytes of data the input carries, its config and what its
	// templates read, as the workflow measured them; not sent.
	size int
}

// IterationInput is the element and index one FOR_EACH iteration runs on.
type IterationInput struct {
	Index int
	Item  json.RawMessage
}

// RunNodeOutput is a node's output, as JSON.
type RunNodeOutput struct {
	Output json.RawMessage
}

// PureNodeOutput is a pure node's output with what its record needs; the
// workflow writes the record.
type PureNodeOutput struct {
	Output      json.RawMessage
	Attempt     int
	StartedAt   *time.Time
	CompletedAt *time.Time
	// Outgrew is the size of an output over the input's OutputRoom, which
	// is then not returned; 0 when Output is the output.
	Outgrew int `json:",omitempty"`
}

// NodeRecordInput is one node record the workflow writes.
type NodeRecordInput struct {
	Key       string
	Type      domain.NodeType
	Status    domain.NodeStatus
	Attempt   int
	Output    json.RawMessage
	Error     string
	StartedAt *time.Time
	// CompletedAt is workflow time, when the workflow decided the record;
	// nil for RUNNING.
	CompletedAt *time.Time
	// Child is a TEMPORAL_WORKFLOW's child workflow, once started.
	Child *ChildWorkflow `json:",omitempty"`
}

// RecordNodesInput carries node records of one execution.
type RecordNodesInput struct {
	ExecutionID string
	Nodes       []NodeRecordInput
}

// CompleteInput is an execution's final status, with the node records
// still to write.
type CompleteInput struct {
	ExecutionID string
	Status      domain.ExecutionStatus
	Error       string
	Nodes       []NodeRecordInput
}

// Activities are the workflow's activities: the Temporal side of the
// worker's use cases in worker.Runs, which they call for everything they
// record, and the node executors. They hold their dependencies, as
// Temporal's samples do, and are registered by name.
type Activities struct {
	runs      *worker.Runs
	executors map[domain.NodeType]ports.NodeExecutor
	// outboundMetrics observes the outbound gate's waits; nil observes
	// nothing.
	outboundMetrics *OutboundMetrics
	metrics         *NodeMetrics
	tracer          trace.Tracer
	// PayloadLimit is the largest node output, in bytes, handed back to
	// Temporal (RunLimits.PayloadLimit); DefaultPayloadLimit when zero.
	PayloadLimit int
}

// ActivitiesOption adds instrumentation to the activities.
type ActivitiesOption func(*Activities)

// WithNodeMetrics observes every node run into m.
func WithNodeMetrics(m *NodeMetrics) ActivitiesOption {
	return func(a *Activities) { a.metrics = m }
}

// WithTracer takes node spans from tp instead of the global provider.
// Every node run gets a span of its own, under the activity's span that
// Temporal's tracing interceptor starts.
func WithTracer(tp trace.TracerProvider) ActivitiesOption {
	return func(a *Activities) { a.tracer = tp.Tracer(tracerName) }
}

// NodeSlotInput names an HTTP node's slot of its workspace's share.
type NodeSlotInput struct {
	WorkspaceID string
	ExecutionID string
	NodeKey     string
	// Share is the workspace's plan's share; Lease how long the slot may
	// be held at most (the node's longest possible run).
	Share int
	Lease time.Duration
}

func (in NodeSlotInput) slot() (ports.NodeSlot, error) {
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return ports.NodeSlot{}, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	exec, err := domain.ParseID(in.ExecutionID)
	if err != nil {
		return ports.NodeSlot{}, temporal.NewNonRetryableApplicationError("bad execution id", "invalid_input", err)
	}
	return ports.NodeSlot{WorkspaceID: ws, ExecutionID: exec, NodeKey: in.NodeKey}, nil
}

// AcquireNodeSlot takes a slot of the node's workspace's share, reporting
// false when the workspace holds its whole share; the workflow then waits
// on a timer, holding no worker slot, and tries again.
func (a *Activities) AcquireNodeSlot(ctx context.Context, in NodeSlotInput) (bool, error) {
	slot, err := in.slot()
	if err != nil {
		return false, err
	}
	return a.runs.AcquireNodeSlot(ctx, slot, in.Share, in.Lease)
}

// ReleaseNodeSlot gives the node's slot back once its activity has ended.
func (a *Activities) ReleaseNodeSlot(ctx context.Context, in NodeSlotInput) error {
	slot, err := in.slot()
	if err != nil {
		return err
	}
	return a.runs.ReleaseNodeSlot(ctx, slot)
}

// NewActivities builds the activities over the worker's use cases and the
// node executor registry.
func NewActivities(runs *worker.Runs, executors []ports.NodeExecutor, opts ...ActivitiesOption) *Activities {
	reg := make(map[domain.NodeType]ports.NodeExecutor, len(executors))
	for _, e := range executors {
		reg[e.Type()] = e
	}
	a := &Activities{runs: runs, executors: reg, tracer: otel.Tracer(tracerName)}
	for _, o := range opts {
		o(a)
	}
	return a
}

// AdmitRunInput names the execution whose run asks for admission, and
// the TEMPORAL_WORKFLOW nodes it may start in the same workflow task,
// whose allow-list check comes with the admission (see AdmitRun).
type AdmitRunInput struct {
	ExecutionID string
	// WorkspaceID is the run's workspace, whose allow-list the
	// TemporalWorkflows are checked against.
	WorkspaceID string `json:",omitempty"`
	// TemporalWorkflows are the graph's TEMPORAL_WORKFLOW nodes that
	// nothing waits on.
	TemporalWorkflows []TemporalWorkflowTarget `json:",omitempty"`
}

// TemporalWorkflowTarget is what a TEMPORAL_WORKFLOW node would start:
// the node and its config's task queue and workflow type.
type TemporalWorkflowTarget struct {
	NodeKey      string
	TaskQueue    string
	WorkflowType string
}

// AdmitRunOutput is what a run's admission found: whether its claim
// stands, and whether its item was cancelled before it started.
type AdmitRunOutput struct {
	Admitted  bool
	Cancelled bool
	// Refusals are the allow-list's refusals of the input's
	// TemporalWorkflows, by node key; a node not named here is
	// permitted. Read only for a run admitted and not cancelled.
	Refusals map[string]string `json:",omitempty"`
}

// AdmitRun answers whether the run's claim stands (worker.Runs.Admit)
// and, for an admitted run, reads its workspace's allow-list now for the
// TEMPORAL_WORKFLOW nodes it may start at once: the run-time check those
// nodes make before their child starts (CheckTemporalWorkflow), answered
// in the same local activity, so that a one-node gated run's first
// workflow task waits on one write and one read, not on two round trips
// of the worker's local activities.
func (a *Activities) AdmitRun(ctx context.Context, in AdmitRunInput) (AdmitRunOutput, error) {
	id, err := domain.ParseID(in.ExecutionID)
	if err != nil {
		return AdmitRunOutput{}, temporal.NewNonRetryableApplicationError("bad execution id", "invalid_input", err)
	}
	admission, err := a.runs.Admit(ctx, id)
	out := AdmitRunOutput{Admitted: admission != ports.AdmissionRefused, Cancelled: admission == ports.AdmissionCancelled}
	if err != nil || !out.Admitted || out.Cancelled || len(in.TemporalWorkflows) == 0 {
		return out, err
	}
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return AdmitRunOutput{}, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	list, err := a.runs.AllowList(ctx, ws)
	if err != nil {
		return AdmitRunOutput{}, err
	}
	for _, t := range in.TemporalWorkflows {
		if refusal := list.Refusal(t.TaskQueue, t.WorkflowType); refusal != "" {
			if out.Refusals == nil {
				out.Refusals = map[string]string{}
			}
			out.Refusals[t.NodeKey] = refusal
		}
	}
	return out, nil
}

// LoadGraph reads the definition version's graph. A missing version cannot
// appear later, so it is not retried.
func (a *Activities) LoadGraph(ctx context.Context, in LoadGraphInput) (domain.Graph, error) {
	id, err := domain.ParseID(in.DefinitionID)
	if err != nil {
		return domain.Graph{}, temporal.NewNonRetryableApplicationError("bad definition id", "invalid_input", err)
	}
	g, err := a.runs.Graph(ctx, id, in.Version)
	if err != nil {
		if isNotFound(err) {
			return domain.Graph{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("definition %s version %d not found", in.DefinitionID, in.Version), "not_found", err)
		}
		return domain.Graph{}, err
	}
	return g, nil
}

// RunNode records the node RUNNING, runs it through its executor and
// records it COMPLETED. A failure is returned to the workflow, which
// records it once retries are over; a permanent failure is not retried.
func (a *Activities) RunNode(ctx context.Context, in RunNodeInput) (RunNodeOutput, error) {
	execID, err := domain.ParseID(in.ExecutionID)
	if err != nil {
		return RunNodeOutput{}, temporal.NewNonRetryableApplicationError("bad execution id", "invalid_input", err)
	}
	info := activity.GetInfo(ctx)
	started := time.Now()
	rec := domain.NodeRecord{Key: in.KeyPrefix + in.Node.Key, Type: in.Node.Type, Status: domain.NodeRunning, Attempt: int(info.Attempt), StartedAt: &started}
	if err = a.runs.NodeStarted(ctx, execID, rec); err != nil {
		return RunNodeOutput{}, err
	}

	// Heartbeats carry cancellation to the activity, so a cancelled
	// execution stops waiting on a slow endpoint.
	hbCtx, stop := context.WithCancel(ctx)
	defer stop()
	go heartbeat(hbCtx)

	if err = a.admitOutbound(ctx, in); err != nil {
		return RunNodeOutput{}, err
	}
	input, out, err := a.runNode(ctx, in)
	if err != nil {
		return RunNodeOutput{}, err
	}
	ended := time.Now()
	rec.Status = domain.NodeCompleted
	rec.Output = out
	rec.CompletedAt = &ended
	if input != nil {
		rec.Input, _ = json.Marshal(input)
	}
	if err := a.runs.NodeFinished(ctx, execID, rec); err != nil {
		return RunNodeOutput{}, err
	}
	return RunNodeOutput{Output: out}, nil
}

// RunPureNode runs a TRANSFORM or CONDITION node, as a local activity: it
// does no I/O and writes no record, so its result travels back inside the
// workflow task, and the workflow records it with its next batch.
func (a *Activities) RunPureNode(ctx context.Context, in RunNodeInput) (PureNodeOutput, error) {
	started := time.Now()
	_, out, err := a.runNode(ctx, in)
	if err != nil {
		return PureNodeOutput{}, err
	}
	ended := time.Now()
	if in.OutputRoom > 0 && len(out) > in.OutputRoom {
		return PureNodeOutput{Outgrew: len(out), Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
	}
	return PureNodeOutput{Output: out, Attempt: int(activity.GetInfo(ctx).Attempt), StartedAt: &started, CompletedAt: &ended}, nil
}

// runNode runs a node through its executor and encodes its output,
// mapping failures to Temporal's retryable and non-retryable errors.
func (a *Activities) runNode(ctx context.Context, in RunNodeInput) (input any, out json.RawMessage, err error) {
	exec, ok := a.executors[in.Node.Type]
	if !ok {
		return nil, nil, temporal.NewNonRetryableApplicationError("no executor for node type "+string(in.Node.Type), "unknown_type", nil)
	}
	tc, err := templateContext(in)
	if err != nil {
		return nil, nil, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_input", err)
	}
	input, output, err := a.execute(ctx, exec, in.Node, tc)
	if err != nil {
		if ctx.Err() != nil {
			// The activity itself was cancelled or timed out, whatever the
			// executor made of it; returning the context's error lets
			// Temporal report a cancellation as one.
			return nil, nil, ctx.Err()
		}
		if ra := retryAfterApplicationError(err); ra != nil {
			return nil, nil, ra
		}
		var p *ports.PermanentError
		if errors.As(err, &p) {
			return nil, nil, temporal.NewNonRetryableApplicationError(err.Error(), p.Kind, nil)
		}
		return nil, nil, temporal.NewApplicationError(err.Error(), "retryable", nil)
	}
	out, err = json.Marshal(output)
	if err != nil {
		return nil, nil, temporal.NewNonRetryableApplicationError("output is not JSON: "+err.Error(), "invalid_output", err)
	}
	limit := a.PayloadLimit
	if limit <= 0 {
		limit = DefaultPayloadLimit
	}
	if len(out) > limit {
		return nil, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"output is %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(out), limit), "payload_too_large", nil)
	}
	return input, out, nil
}

// execute runs the node's executor inside a span carrying the node's key
// and type, and observes its duration and outcome. It is the one place a
// node runs, whatever runs the activity.
func (a *Activities) execute(ctx context.Context, exec ports.NodeExecutor, node domain.Node, tc domain.TemplateContext) (any, any, error) {
	ctx, span := a.tracer.Start(ctx, "node "+node.Key, trace.WithAttributes(
		attribute.String("sluice.node.key", node.Key),
		attribute.String("sluice.node.type", string(node.Type)),
	))
	defer span.End()
	started := time.Now()
	input, output, err := exec.Execute(ctx, ports.NodeRun{Node: node, Context: tc})
	outcome := runOutcome(ctx, err)
	if a.metrics != nil {
		a.metrics.Duration.WithLabelValues(string(node.Type), outcome).Observe(time.Since(started).Seconds())
	}
	span.SetAttributes(attribute.String("sluice.node.outcome", outcome))
	if err != nil {
		span.SetStatus(codes.Error, outcome)
	}
	return input, output, err
}

// runOutcome classifies one executor run for metrics and spans.
func runOutcome(ctx context.Context, err error) string {
	var p *ports.PermanentError
	switch {
	case err == nil:
		return NodeOutcomeCompleted
	case ctx.Err() != nil:
		return NodeOutcomeCancelled
	case errors.As(err, &p):
		return NodeOutcomeFailed
	default:
		return NodeOutcomeRetryable
	}
}

func heartbeat(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			activity.RecordHeartbeat(ctx)
		}
	}
}

func templateContext(in RunNodeInput) (domain.TemplateContext, error) {
	tc := domain.TemplateContext{ExecutionID: in.ExecutionID, WorkspaceID: in.WorkspaceID, Steps: map[string]any{}}
	if len(in.Input) > 0 {
		v, err := domain.DecodeJSON(in.Input)
		if err != nil {
			return tc, fmt.Errorf("execution input: %w", err)
		}
		tc.Input = v
	}
	for k, raw := range in.Steps {
		v, err := domain.DecodeJSON(raw)
		if err != nil {
			return tc, fmt.Errorf("output of %s: %w", k, err)
		}
		tc.Steps[k] = v
	}
	if it := in.Iteration; it != nil {
		v, err := domain.DecodeJSON(it.Item)
		if err != nil {
			return tc, fmt.Errorf("item %d: %w", it.Index, err)
		}
		tc.Iteration = &domain.TemplateIteration{Item: v, Index: it.Index}
	}
	return tc, nil
}

// LoadRetryOutputs reads the outputs a retry reuses and names the
// execution it retries (worker.Runs.RetryOutputs). An original that is gone
// is a failure no retry can change.
func (a *Activities) LoadRetryOutputs(ctx context.Context, in RetryOutputsInput) (RetryOutputs, error) {
	id, err := domain.ParseID(in.ExecutionID)
	if err != nil {
		return RetryOutputs{}, temporal.NewNonRetryableApplicationError("bad execution id", "invalid_input", err)
	}
	of, err := domain.ParseID(in.RetryOf)
	if err != nil {
		return RetryOutputs{}, temporal.NewNonRetryableApplicationError("bad retried execution id", "invalid_input", err)
	}
	out, err := a.runs.RetryOutputs(ctx, id, of, in.Limit)
	if errors.Is(err, ports.ErrNotFound) {
		return RetryOutputs{}, temporal.NewNonRetryableApplicationError("the retried execution is gone (deleted by retention?)", "not_found", err)
	}
	return RetryOutputs{Outputs: out}, err
}

// RecordNodes writes node records the workflow decides, in one batch:
// pure nodes, failures after retries, skipped and cancelled nodes, DELAY
// timers.
func (a *Activities) RecordNodes(ctx context.Context, in RecordNodesInput) error {
	execID, err := domain.ParseID(in.ExecutionID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad execution id", "invalid_input", err)
	}
	return a.runs.RecordNodes(ctx, execID, nodeRecords(in.Nodes))
}

// nodeRecords converts the workflow's records for the store.
func nodeRecords(nodes []NodeRecordInput) []domain.NodeRecord {
	recs := make([]domain.NodeRecord, len(nodes))
	for i, n := range nodes {
		recs[i] = domain.NodeRecord{Key: n.Key, Type: n.Type, Status: n.Status, Attempt: max(1, n.Attempt), Output: n.Output, StartedAt: n.StartedAt, CompletedAt: n.CompletedAt}
		if n.Child != nil {
			recs[i].ChildWorkflowID, recs[i].ChildRunID = n.Child.WorkflowID, n.Child.RunID
		}
		if n.Error != "" {
			msg := n.Error
			recs[i].Error = &msg
		}
	}
	return recs
}

// CompleteExecution records the final status with the last node records
// and ends the queue item (worker.Runs.Complete).
func (a *Activities) CompleteExecution(ctx context.Context, in CompleteInput) error {
	execID, err := domain.ParseID(in.ExecutionID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad execution id", "invalid_input", err)
	}
	return a.runs.Complete(ctx, execID, in.Status, in.Error, nodeRecords(in.Nodes)...)
}
