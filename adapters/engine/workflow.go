package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// Registered names. They are part of the recorded histories, so they never
// change.
const (
	ExecutionWorkflowName   = "SluiceExecution"
	admitRunActivity        = "AdmitRun"
	loadGraphActivity       = "LoadGraph"
	runNodeActivity         = "RunNode"
	runPureNodeActivity     = "RunPureNode"
	recordNodesActivity     = "RecordNodes"
	completeActivity        = "CompleteExecution"
	acquireNodeSlotActivity = "AcquireNodeSlot"
	releaseNodeSlotActivity = "ReleaseNodeSlot"
	outboundTurnActivity    = "OutboundTurn"
	// pauseOutboundHostActivity is the local activity that pauses a host.
	pauseOutboundHostActivity = "PauseOutboundHost"
)

// ExecutionInput starts an execution's workflow. It carries the graph and
// the plan the dispatcher read at admission, so the run needs no round trip
// to learn them.
type ExecutionInput struct {
	ExecutionID  string
	WorkspaceID  string
	DefinitionID string
	Version      int
	Input        json.RawMessage
	// Plan sizes the nodes in flight (RunLimits.NodesInFlight).
	Plan domain.Plan
	// Graph is the version's graph as stored; when empty the workflow
	// loads it through the LoadGraph local activity. A child run's is
	// always empty: it loads its own (childGraph).
	Graph json.RawMessage `json:",omitempty"`
	// RetryOf is the execution this one retries from its failed nodes,
	// whose COMPLETED nodes' outputs it reuses (loadReused).
	RetryOf string `json:",omitempty"`
	// RunTimeout is the enqueue's run deadline, if it set one; the
	// graph's runTimeout applies too, the shorter winning (armDeadline).
	RunTimeout time.Duration `json:",omitempty"`
	// Parent is set on a SUB_WORKFLOW's child run.
	Parent *ParentRun `json:",omitempty"`
}

// ExecutionResult is what the workflow returns: the status it recorded.
type ExecutionResult struct {
	Status domain.ExecutionStatus
	Error  string
	// Output is a child run's outputs (see finishChild).
	Output json.RawMessage `json:",omitempty"`
	// Version is the version a child run ran (see childGraph).
	Version int `json:",omitempty"`
}

// RetryConfig is how node activities are retried. It is read from the
// worker's configuration once per execution through workflow.SideEffect, so
// a configuration change never alters a running execution's replay.
type RetryConfig struct {
	InitialInterval    time.Duration
	BackoffCoefficient float64
	MaximumInterval    time.Duration
	MaximumAttempts    int32
	// ExternalAPITaskQueue is where HTTP_REQUEST nodes run.
	ExternalAPITaskQueue string
}

// DefaultRetryConfig is three attempts with exponential backoff from 1 s.
func DefaultRetryConfig() RetryConfig {
	return RetryConfig{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 3}
}

// RunLimits bound what one execution takes of the shared service. Like
// RetryConfig they are read once per execution through a side effect.
type RunLimits struct {
	// NodesInFlight caps, per plan, the nodes of one execution that run at
	// once (DELAY timers hold no worker slot and are not counted); the rest
	// wait, ready, in the workflow. A plan missing here gets FREE's cap.
	// These per-plan maps are the fallback: with a QuotaSource, an
	// execution's plan's entry is its workspace's figure in force
	// (Workflows.limitsFor), here and in WorkspaceNodesInFlight and
	// ForEachItems.
	NodesInFlight map[domain.Plan]int
	// WorkspaceNodesInFlight caps, per plan, the HTTP nodes of all of one
	// workspace's executions that hold or wait for an external-API worker
	// slot at once: the workspace's share of that worker. A node past it
	// waits in its workflow, on a timer, holding no worker slot. A plan
	// missing here has no share cap.
	WorkspaceNodesInFlight map[domain.Plan]int
	// PayloadLimit is the largest node input or output, in bytes, the
	// engine hands to Temporal. Temporal refuses payloads over 2 MB by
	// ending the workflow; below this limit a node fails instead, with a
	// recorded error.
	PayloadLimit int
	// HistoryLimit is the history size, in bytes, past which nothing more
	// is added (historyRoom) and the execution fails; Temporal ends a
	// workflow whose history passes 50 MB.
	HistoryLimit int
	// HistoryEventsLimit is the history's length, in events, at which
	// nothing more is added (historyRoom) and the execution fails;
	// Temporal ends a workflow whose history passes 51,200 events.
	HistoryEventsLimit int
	// TaskLimit bounds the bytes one workflow task hands back to Temporal,
	// whose reply is refused past 4 MiB (gRPC's message limit), which
	// would fail the task again on every retry and hold the slot for
	// ever. A task carries the results of the pure nodes that ended in it
	// (local activity markers) and the inputs of the activities it
	// schedules; a node starts only while its bytes fit, each pure node
	// counted at PayloadLimit until its result is known. Never below
	// PayloadLimit.
	TaskLimit int
	// OutboundPauses bound how long an upstream's Retry-After holds a
	// node, and how many hosts a workspace may have paused at once.
	// Executions recorded before them read zero, and the defaults apply.
	OutboundPauses domain.OutboundPauses
	// ForEachItems caps, per plan, the elements one FOR_EACH runs over
	// (domain.DefaultForEachItems when empty).
	ForEachItems map[domain.Plan]int
}

// Default limits.
const (
	DefaultPayloadLimit = 1536 * 1024
	DefaultHistoryLimit = 32 * 1024 * 1024
	DefaultTaskLimit    = 3 * 1024 * 1024
)

// taskEntryOverhead is what one node's entry in a task carries besides
// its data: the command or marker around it and the encoding of its fields.
const taskEntryOverhead = 1024

// DefaultNodesInFlight is FREE 4, PRO 10, ENTERPRISE 25, as migration
// 00017 seeds the plans' nodesInFlight.
func DefaultNodesInFlight() map[domain.Plan]int {
	return map[domain.Plan]int{domain.PlanFree: 4, domain.PlanPro: 10, domain.PlanEnterprise: 25}
}

// DefaultWorkspaceNodesInFlight is FREE 4, PRO 10, ENTERPRISE 15: each
// below the external-API worker's default 20 slots, so that one workspace
// always leaves room for the others.
func DefaultWorkspaceNodesInFlight() map[domain.Plan]int {
	return map[domain.Plan]int{domain.PlanFree: 4, domain.PlanPro: 10, domain.PlanEnterprise: 15}
}

// DefaultRunLimits are DefaultNodesInFlight, DefaultWorkspaceNodesInFlight,
// the default payload and history limits and domain.DefaultOutboundPauses.
func DefaultRunLimits() RunLimits {
	return RunLimits{NodesInFlight: DefaultNodesInFlight(), WorkspaceNodesInFlight: DefaultWorkspaceNodesInFlight(),
		PayloadLimit: DefaultPayloadLimit, HistoryLimit: DefaultHistoryLimit, HistoryEventsLimit: DefaultHistoryEventsLimit, TaskLimit: DefaultTaskLimit,
		OutboundPauses: domain.DefaultOutboundPauses()}
}

// withDefaults fills unset limits with the defaults.
func (l RunLimits) withDefaults() RunLimits {
	d := DefaultRunLimits()
	if len(l.NodesInFlight) == 0 {
		l.NodesInFlight = d.NodesInFlight
	}
	if len(l.WorkspaceNodesInFlight) == 0 {
		l.WorkspaceNodesInFlight = d.WorkspaceNodesInFlight
	}
	if len(l.ForEachItems) == 0 {
		l.ForEachItems = domain.DefaultForEachItems()
	}
	if l.PayloadLimit <= 0 {
		l.PayloadLimit = d.PayloadLimit
	}
	if l.HistoryLimit <= 0 {
		l.HistoryLimit = d.HistoryLimit
	}
	if l.HistoryEventsLimit <= 0 {
		l.HistoryEventsLimit = d.HistoryEventsLimit
	}
	if l.TaskLimit <= 0 {
		l.TaskLimit = d.TaskLimit
	}
	l.TaskLimit = max(l.TaskLimit, l.PayloadLimit+taskEntryOverhead)
	l.OutboundPauses = l.OutboundPauses.WithDefaults()
	return l
}

// inFlight is the cap of plan.
func (l RunLimits) inFlight(plan domain.Plan) int {
	if n, ok := l.NodesInFlight[plan]; ok && n > 0 {
		return n
	}
	if n := l.NodesInFlight[domain.PlanFree]; n > 0 {
		return n
	}
	return 1
}

// Workflows holds the worker's configuration for the workflow.
type Workflows struct {
	Retry  RetryConfig
	Limits RunLimits
	// Quotas, when set, give each execution its workspace's nodes in
	// flight, share and FOR_EACH cap in force over RunLimits' (limitsFor).
	Quotas QuotaSource
}

// settings is the configuration one execution runs with, fixed at its
// start by a side effect.
type settings struct {
	Retry  RetryConfig
	Limits RunLimits
}

// nodeOutcome is one finished node, as the selector hands it back.
type nodeOutcome struct {
	node    domain.Node
	output  json.RawMessage
	err     error
	started *time.Time
	ended   *time.Time
	attempt int
	// recorded is set when the node's own activity wrote its COMPLETED
	// record (HTTP_REQUEST); otherwise the workflow writes it.
	recorded bool
	// branch is the branch a WAIT_FOR_EVENT's outcome took (see
	// completeIn); nil for other nodes.
	branch *bool
	// child is a TEMPORAL_WORKFLOW's child once Temporal started it.
	child *ChildWorkflow
}

// Execution runs one execution's DAG: every ready node at once, up to the
// plan's nodes in flight, with results applied to the per-execution domain
// scheduler one at a time in the order their events appear in the history,
// which replay reproduces exactly.
//
// Only HTTP_REQUEST nodes leave the worker, as activities on the external
// API queue that record themselves (RUNNING while they run). TRANSFORM and
// CONDITION nodes run as local activities: their results are markers in
// the workflow task that ran them, with no round trip to the server. The
// workflow's own records (pure nodes, DELAY, failures, skips) are batched
// and written by a local activity whenever the workflow is about to wait on
// the server, and at the end together with the execution's status.
//
// It first asks whether its claim stands (AdmitRun): a run started for a
// claim its dispatcher's peer had already released ends at once, FAILED
// in Temporal with an error of type NotAdmittedErrorType, having recorded
// nothing. An admitted run always ends by recording the execution's status through
// CompleteExecution, on a context that cancellation cannot interrupt, so a
// cancelled or failed execution frees its slot like a completed one.
func (w *Workflows) Execution(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
	var cfg settings
	if err := workflow.SideEffect(ctx, func(workflow.Context) any {
		return settings{Retry: w.Retry, Limits: w.limitsFor(in)}
	}).Get(&cfg); err != nil {
		return ExecutionResult{}, err
	}
	run := &executionRun{
		ctx: ctx, executionID: executionIDFrom(workflow.GetInfo(ctx).WorkflowExecution.ID, in.ExecutionID),
		in: in, retry: cfg.Retry, limits: cfg.Limits.withDefaults(), outputs: map[string]any{},
		share: cfg.Limits.WorkspaceNodesInFlight[in.Plan],
	}
	// A graph the input carries is decoded before the admission, which
	// then reads the allow-list for its TEMPORAL_WORKFLOW nodes too.
	graph, graphMsg, carried := run.carriedGraph()
	if admission, msg := run.admit(graph); msg != "" {
		return run.finish(domain.ExecutionFailed, msg)
	} else if !admission.Admitted {
		return ExecutionResult{}, temporal.NewNonRetryableApplicationError(
			"not admitted: the claim this run was started for had been released", NotAdmittedErrorType, nil)
	} else if admission.Cancelled {
		return run.finish(domain.ExecutionCancelled, "cancelled before the run started")
	}

	if !carried {
		graph, graphMsg = run.graph()
	}
	if ctx.Err() != nil {
		return run.cancelled(nil)
	}
	if graphMsg != "" {
		return run.finish(domain.ExecutionFailed, graphMsg)
	}
	ctx = run.armDeadline(graph)
	if msg := run.loadReused(); msg != "" {
		return run.finish(domain.ExecutionFailed, msg)
	}
	sched, err := domain.NewScheduler(graph)
	if err != nil {
		return run.finish(domain.ExecutionFailed, "graph "+err.Error())
	}
	if len(in.Input) > 0 {
		if run.input, err = domain.DecodeJSON(in.Input); err != nil {
			return run.finish(domain.ExecutionFailed, "execution input: "+err.Error())
		}
	}
	run.edges = graph.Edges
	run.types = make(map[string]domain.NodeType, len(graph.Nodes))
	run.readers = map[string]int{}
	for _, n := range graph.Nodes {
		run.types[n.Key] = n.Type
		for _, key := range domain.ReadsOf(n).StepKeys() {
			run.readers[key]++
		}
	}
	run.retainLeaves(graph)

	failure, held := run.drive(sched)
	switch {
	case ctx.Err() != nil && run.deadline != "":
		return run.timedOut(sortedUnion(sched.Unrun(), held))
	case ctx.Err() != nil:
		workflow.GetLogger(ctx).Info("execution cancelled", "execution_id", run.executionID)
		return run.cancelled(sortedUnion(sched.Unrun(), held))
	case failure != "":
		run.record(run.skipped(sortedUnion(sched.Unrun(), held), "not run: "+failure)...)
		return run.finish(domain.ExecutionFailed, failure)
	}
	return run.finish(domain.ExecutionCompleted, "")
}

// NotAdmittedErrorType is the type of the error a run refused admission ends
// with: Temporal shows such a workflow FAILED, and Sluice has no record of
// it, since its item runs under another claim.
const NotAdmittedErrorType = "NotAdmitted"

// admit asks, before the run has any effect, whether the claim it was
// started for stands (AdmitRun); a child run belongs to its parent's, and
// is not asked. It returns a failure message when the question could not
// be answered, "" otherwise: the run then fails with it, which records
// nothing for a claim that was released. The same local activity reads
// the allow-list for g's TEMPORAL_WORKFLOW nodes that wait on nothing
// (temporalWorkflowRoots), which admittedRefusal hands to those launched
// in the same workflow task.
func (r *executionRun) admit(g domain.Graph) (AdmitRunOutput, string) {
	if r.in.Parent != nil {
		return AdmitRunOutput{Admitted: true}, ""
	}
	in := AdmitRunInput{ExecutionID: r.executionID}
	if targets := temporalWorkflowRoots(g); len(targets) > 0 {
		in.WorkspaceID, in.TemporalWorkflows = r.in.WorkspaceID, targets
	}
	var admission AdmitRunOutput
	err := workflow.ExecuteLocalActivity(bookkeeping(r.ctx), admitRunActivity, in).Get(r.ctx, &admission)
	if err != nil {
		return AdmitRunOutput{}, "checking the run's admission: " + errorMessage(err)
	}
	if len(in.TemporalWorkflows) > 0 {
		r.admitted = admittedChecks{task: workflow.GetInfo(r.ctx).GetCurrentHistoryLength(), keys: map[string]bool{}, refusals: admission.Refusals}
		for _, t := range in.TemporalWorkflows {
			r.admitted.keys[t.NodeKey] = true
		}
	}
	return admission, ""
}

// admittedChecks are the allow-list's verdicts the admission read, for
// the TEMPORAL_WORKFLOW nodes it names, and the workflow task (by its
// history length) it ended in.
type admittedChecks struct {
	task     int
	keys     map[string]bool
	refusals map[string]string
}

// temporalWorkflowRoots are g's TEMPORAL_WORKFLOW nodes that no edge
// leads to, which the run launches first, in its first workflow task
// unless the nodes in flight or the task's bytes hold them. A config
// that does not decode is left to the node's launch to report.
func temporalWorkflowRoots(g domain.Graph) []TemporalWorkflowTarget {
	var out []TemporalWorkflowTarget
	for _, n := range g.Nodes {
		if n.Type != domain.NodeTemporalWorkflow || slices.ContainsFunc(g.Edges, func(e domain.Edge) bool { return e.To == n.Key }) {
			continue
		}
		if cfg, err := domain.DecodeTemporalWorkflowConfig(n.Config); err == nil {
			out = append(out, TemporalWorkflowTarget{NodeKey: n.Key, TaskQueue: cfg.TaskQueue, WorkflowType: cfg.WorkflowType})
		}
	}
	return out
}

// carriedGraph decodes the graph the input carries, when it carries one
// (ok); a child run's never does. It returns a failure message, "" on
// success.
func (r *executionRun) carriedGraph() (g domain.Graph, msg string, ok bool) {
	if r.in.Parent != nil || len(r.in.Graph) == 0 || string(r.in.Graph) == "null" {
		return domain.Graph{}, "", false
	}
	g, err := domain.DecodeGraph(r.in.Graph)
	if err != nil {
		return domain.Graph{}, "graph " + err.Error(), true
	}
	return g, "", true
}

// graph loads the graph of a run whose input carries none, as a child
// run's never does. It returns a failure message, "" on success.
func (r *executionRun) graph() (domain.Graph, string) {
	if r.in.Parent != nil {
		return r.childGraph()
	}
	var g domain.Graph
	err := workflow.ExecuteLocalActivity(bookkeeping(r.ctx), loadGraphActivity, LoadGraphInput{
		DefinitionID: r.in.DefinitionID, Version: r.in.Version,
	}).Get(r.ctx, &g)
	if err != nil {
		return domain.Graph{}, "loading graph: " + errorMessage(err)
	}
	return g, ""
}

// executionIDFrom parses the execution id out of the workflow id
// ("execution-<uuid>"), the authority because it is what makes a start
// idempotent; a workflow started under another id falls back to the id in
// its input.
func executionIDFrom(workflowID, fallback string) string {
	if id, ok := strings.CutPrefix(workflowID, workflowIDPrefix); ok {
		if _, err := domain.ParseID(id); err == nil {
			return id
		}
	}
	return fallback
}

// executionRun is the state of one workflow run.
type executionRun struct {
	ctx         workflow.Context
	executionID string
	in          ExecutionInput
	retry       RetryConfig
	limits      RunLimits
	types       map[string]domain.NodeType
	// edges are the graph's, for the branches a node may take.
	edges []domain.Edge
	// input is the execution's input and outputs the completed nodes'
	// outputs, decoded, from which each node gets the parts it reads. An
	// output is kept only while a node that reads it has still to start:
	// readers counts them per key, so a run parked in a long DELAY pins
	// only what is still to be read.
	input   any
	outputs map[string]any
	readers map[string]int
	// share is the workspace's share of the external-API worker its HTTP
	// nodes take a slot of (RunLimits.WorkspaceNodesInFlight); 0 for none.
	share int
	// unwritten are records decided but not yet written; see flush.
	unwritten []NodeRecordInput
	// writing is set while a write of records is in flight, flusher
	// while flushAsTheyEnd's writer runs.
	writing, flusher bool
	last             nodeOutcome
	// task sizes each workflow task against RunLimits.TaskLimit.
	task taskLoad
	// deadline is set, to the reason, once the run's deadline passed.
	deadline string
	// deadlineAt is when the run's deadline passes; zero for none.
	deadlineAt time.Time
	// reused are the outputs a retry reuses, by node key, each dropped
	// once its node has ended with it.
	reused map[string]json.RawMessage
	// leaves are a child run's nodes nothing reads: its outputs.
	leaves []string
	// busy counts the node activities in flight, against the plan's
	// nodes in flight: drive's nodes and FOR_EACH iterations alike.
	busy int
	// clock is the latest time the run has stamped on a record or read
	// from one (see now).
	clock time.Time
	// admitted are the allow-list's verdicts read with the admission.
	admitted admittedChecks
}

// taskLoad is what the current workflow task carries back to Temporal,
// as far as nodes make it: used by results and scheduled inputs, reserved
// by pure nodes still running (their OutputRoom each, their results being
// unknown), and the events it adds (a marker or command per node, a
// marker per records write). historyLength is the history length the
// task started at, which changes, deterministically on replay, when a new
// task starts.
type taskLoad struct {
	used, reserved int
	events         int
	historyLength  int
	// pures are the pure nodes holding a reservation, with its size.
	pures map[string]int
}

// restart empties the load, as a new workflow task starts.
func (t *taskLoad) restart() {
	t.used, t.events = 0, 0
}

// drive launches ready nodes, at most the plan's cap of them at once, and
// applies their outcomes until nothing runs. After a failure or a
// cancellation it launches nothing new but still waits for the nodes in
// flight, so that each gets its final record. It returns the first failure
// ("" if none) and the keys of ready nodes it never launched.
//
// A ready node also waits while its bytes would
// take the current workflow task past RunLimits.TaskLimit; when only such
// nodes are left, a 1 ms timer ends the task (its markers and commands go
// to the server) and the next one starts empty.
func (r *executionRun) drive(sched *domain.Scheduler) (string, []string) {
	sel := workflow.NewSelector(r.ctx)
	capacity := r.nodesInFlight()
	var ready []domain.Node
	pending, local := 0, 0
	failure := ""
	for {
		waitingForTask := false
		if r.ctx.Err() == nil && failure == "" {
			next, err := sched.Next()
			if err != nil {
				failure = err.Error()
			}
			ready = append(ready, next...)
			r.observeTask()
			held := ready[:0]
			for _, n := range ready {
				if holdsSlot(n.Type) && r.busy >= capacity {
					held = append(held, n)
					continue
				}
				if n.Type != domain.NodeDelay {
					in, err := r.nodeInput(n)
					if err == nil && !r.fitsTask(n, in) {
						held = append(held, n)
						waitingForTask = true
						continue
					}
					r.launchPrepared(sel, n, in, err)
				} else {
					r.launch(sel, n)
				}
				if holdsSlot(n.Type) {
					r.busy++
				}
				if isPure(n.Type) {
					local++
				}
				pending++
			}
			ready = held
		}
		if pending == 0 && waitingForTask {
			r.flush(r.ctx)
			_ = workflow.Sleep(r.ctx, time.Millisecond)
			r.task.restart()
			continue
		}
		if pending == 0 {
			keys := make([]string, len(ready))
			for i, n := range ready {
				keys[i] = n.Key
			}
			return failure, keys
		}
		if local == 0 {
			// Only the server can wake the workflow now, so this is the
			// moment to make the decided records visible.
			r.flush(r.ctx)
		}
		sel.Select(r.ctx)
		pending--
		if t := r.last.node.Type; holdsSlot(t) {
			r.busy--
			if isPure(t) {
				local--
				// awaitPure ended a run node's reservation; this ends a
				// reused one's.
				r.pureEnded(r.last)
			}
		}
		if msg := r.apply(sched, r.last); failure == "" {
			failure = msg
		}
	}
}

// observeTask starts a new task load when a new workflow task has
// started since the last look.
func (r *executionRun) observeTask() {
	if n := workflow.GetInfo(r.ctx).GetCurrentHistoryLength(); n != r.task.historyLength {
		r.task.historyLength = n
		r.task.restart()
	}
}

// fitsTask reports whether node n, with activity input in, fits in the
// current workflow task, and if so takes its room: a pure node reserves
// its result's room (outputRoom), an activity its input. A node always
// fits an empty task (PayloadLimit is below TaskLimit).
func (r *executionRun) fitsTask(n domain.Node, in RunNodeInput) bool {
	need := taskEntryOverhead
	if isPure(n.Type) {
		need += r.outputRoom(in)
	} else {
		need += r.startBytes(n, in)
	}
	if taken := r.task.used + r.task.reserved; taken > 0 && taken+need > r.limits.TaskLimit {
		return false
	}
	r.task.events++
	if isPure(n.Type) {
		r.task.reserved += need
		if r.task.pures == nil {
			r.task.pures = map[string]int{}
		}
		r.task.pures[n.Key] = need
	} else {
		r.task.used += need
	}
	return true
}

// pureOutputSlack is what a pure node's output may hold beyond the data
// it carries before it outgrows its room: a CONDITION's verdict, an
// index, an execution id, the JSON around them.
const pureOutputSlack = 256

// withOutputRoom gives a pure node's input in the room of what it carries
// (OutputRoom), for DAG nodes and FOR_EACH iterations alike: its output is
// built of its config and what it reads, and pureOutputSlack covers what
// it holds besides, so the task awaiting it reserves that, not the
// payload limit, and many pure nodes end in one workflow task. One that
// outgrows its room runs again with the payload limit reserved (awaitPure).
// A room that would reach the payload limit is left 0, the payload limit.
func (r *executionRun) withOutputRoom(in RunNodeInput) RunNodeInput {
	if room := in.size + pureOutputSlack; isPure(in.Node.Type) && room < r.limits.PayloadLimit {
		in.OutputRoom = room
	}
	return in
}

// outputRoom is the bytes a pure node's result may take in the task that
// awaits it: in.OutputRoom, or the payload limit when that is 0.
func (r *executionRun) outputRoom(in RunNodeInput) int {
	if in.OutputRoom > 0 {
		return min(in.OutputRoom, r.limits.PayloadLimit)
	}
	return r.limits.PayloadLimit
}

// pureEnded replaces a pure node's reservation by the size of its result,
// which its marker carries in the current task.
func (r *executionRun) pureEnded(o nodeOutcome) {
	need, ok := r.task.pures[o.node.Key]
	if !ok {
		return
	}
	delete(r.task.pures, o.node.Key)
	r.observeTask()
	r.task.reserved -= need
	r.task.used += taskEntryOverhead + len(o.output)
}

// isPure reports whether a node type runs inside the worker, as a local
// activity, with no I/O of its own.
func isPure(t domain.NodeType) bool {
	return t == domain.NodeTransform || t == domain.NodeCondition
}

// apply feeds one node's outcome to the scheduler and records what the
// workflow decided about it. It returns a failure message, "" if the node
// did not fail.
func (r *executionRun) apply(sched *domain.Scheduler, o nodeOutcome) string {
	key := o.node.Key
	if o.err == nil {
		out, err := domain.DecodeJSON(o.output)
		if err != nil {
			out = nil
		}
		skipped, err := completeIn(sched, o, out)
		if err == nil {
			if r.readers[key] > 0 {
				r.outputs[key] = out
			}
			if !o.recorded {
				r.record(NodeRecordInput{Key: key, Type: o.node.Type, Status: domain.NodeCompleted, Attempt: o.attempt,
					Output: o.output, StartedAt: o.started, CompletedAt: o.ended, Child: o.child})
			}
			r.record(r.skipped(skipped, "branch not taken")...)
			return ""
		}
		o.err = err
	} else if temporal.IsCanceledError(o.err) && r.ctx.Err() != nil {
		r.record(NodeRecordInput{Key: key, Type: o.node.Type, Status: domain.NodeCancelled, Error: r.cancelReason(), StartedAt: o.started, Child: o.child})
		return ""
	}
	// A node failed, or was cancelled without the execution being
	// cancelled, which leaves its successors as stuck as a failure would.
	msg := errorMessage(o.err)
	_ = sched.Failed(key)
	r.record(NodeRecordInput{Key: key, Type: o.node.Type, Status: domain.NodeFailed, Error: msg, StartedAt: o.started, Child: o.child})
	return fmt.Sprintf("node %s failed: %s", key, msg)
}

// bookkeeping is the local activity context for Sluice's own database
// work: short, retried generously.
func bookkeeping(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
}

// completionWrite is the local activity context of the completion write:
// bookkeeping's options with no limit on attempts.
func completionWrite(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	})
}

// completionAttempts is how often the completion is tried before the
// execution is recorded FAILED without its last records: with the
// backoff, about two and a half minutes, which a Postgres restart fits.
const completionAttempts = 10

// boundedCompletionWrite is the local activity context of the completion
// write under boundedTasksChange: completionAttempts tries within five
// minutes (a local activity's retries otherwise end with its
// start-to-close timeout).
func boundedCompletionWrite(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: completionAttempts},
	})
}

// nodeRetry is the retry policy of node activities.
func (r *executionRun) nodeRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    r.retry.InitialInterval,
		BackoffCoefficient: r.retry.BackoffCoefficient,
		MaximumInterval:    r.retry.MaximumInterval,
		MaximumAttempts:    r.retry.MaximumAttempts,
	}
}

// launch starts one node and registers its completion with the selector.
func (r *executionRun) launch(sel workflow.Selector, n domain.Node) {
	if r.reuse(sel, n) {
		return
	}
	if n.Type == domain.NodeDelay {
		r.launchDelay(sel, n)
		return
	}
	in, err := r.nodeInput(n)
	r.launchPrepared(sel, n, in, err)
}

// launchPrepared starts node n with its activity input in, or fails it
// with err from building that input. A started node no longer needs the
// outputs it reads, which are dropped once no other node is to read them.
func (r *executionRun) launchPrepared(sel workflow.Selector, n domain.Node, in RunNodeInput, err error) {
	if r.reuse(sel, n) {
		return
	}
	if err != nil {
		f, outcome := workflow.NewFuture(r.ctx)
		outcome.SetError(err)
		sel.AddFuture(f, func(f workflow.Future) {
			r.last = nodeOutcome{node: n, err: f.Get(r.ctx, nil)}
		})
		return
	}
	if r.launchComposite(sel, n, in) {
		return
	}
	r.started(n)
	timeout, retry := r.attemptPolicy(n)
	if isPure(n.Type) {
		floor := r.now()
		p := r.startPure(r.ctx, in, timeout, retry)
		f, settle := workflow.NewFuture(r.ctx)
		workflow.Go(r.ctx, func(ctx workflow.Context) {
			settle.Set(r.awaitPure(ctx, p))
		})
		sel.AddFuture(f, func(f workflow.Future) {
			var out PureNodeOutput
			err := f.Get(r.ctx, &out)
			started, ended := causalSpan(floor, out.StartedAt, out.CompletedAt)
			r.last = nodeOutcome{node: n, output: out.Output, err: err, started: started, ended: ended, attempt: out.Attempt}
		})
		return
	}
	f := r.runActivityNode(r.ctx, n, r.activityOptions(n, timeout, retry), in)
	sel.AddFuture(f, func(f workflow.Future) {
		var out RunNodeOutput
		err := f.Get(r.ctx, &out)
		r.last = nodeOutcome{node: n, output: out.Output, err: err, recorded: true}
	})
}

// pureRun is a pure node's local activity in flight: its input, the
// local activity context it runs on, and its future.
type pureRun struct {
	in  RunNodeInput
	ctx workflow.Context
	f   workflow.Future
}

// startPure starts pure node input in as a local activity on ctx, each
// attempt bounded by timeout and retried under retry, within the room its
// task reserved (fitsTask).
func (r *executionRun) startPure(ctx workflow.Context, in RunNodeInput, timeout time.Duration, retry *temporal.RetryPolicy) pureRun {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: timeout,
		RetryPolicy:         retry,
	})
	return pureRun{in: in, ctx: lctx, f: workflow.ExecuteLocalActivity(lctx, runPureNodeActivity, in)}
}

// awaitPure waits for pure run p and ends its reservation. One whose
// output outgrew its room runs again, once, with the payload limit
// reserved, which the activity's own check bounds.
func (r *executionRun) awaitPure(ctx workflow.Context, p pureRun) (PureNodeOutput, error) {
	for {
		var out PureNodeOutput
		err := p.f.Get(ctx, &out)
		r.pureEnded(nodeOutcome{node: p.in.Node, output: out.Output})
		if err != nil || out.Outgrew == 0 || p.in.OutputRoom == 0 {
			return out, err
		}
		p.in.OutputRoom = 0
		if err := r.takeTaskRoom(ctx, p.in); err != nil {
			return PureNodeOutput{}, err
		}
		p.f = workflow.ExecuteLocalActivity(p.ctx, runPureNodeActivity, p.in)
	}
}

// activityOptions are the options of node n's activity, each attempt
// bounded by timeout and retried under retry.
func (r *executionRun) activityOptions(n domain.Node, timeout time.Duration, retry *temporal.RetryPolicy) workflow.ActivityOptions {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    10 * time.Second,
		// Waiting lets the activity acknowledge a cancellation before the
		// node is recorded CANCELLED, so no late write follows the record.
		WaitForCancellation: true,
		RetryPolicy:         retry,
		// Task-queue fairness: the server hands out a queue's tasks round
		// robin across fairness keys, so one workspace's backlog cannot
		// keep another's nodes waiting behind it.
		Priority: temporal.Priority{FairnessKey: r.in.WorkspaceID},
	}
	if n.Type == domain.NodeHTTPRequest && r.retry.ExternalAPITaskQueue != "" {
		opts.TaskQueue = r.retry.ExternalAPITaskQueue
	}
	return opts
}

// runActivityNode runs node n as its activity on ctx: an HTTP node
// through its host's turn and within the workspace's share (runOutbound),
// any other directly. The future resolves as the activity's would.
func (r *executionRun) runActivityNode(ctx workflow.Context, n domain.Node, opts workflow.ActivityOptions, in RunNodeInput) workflow.Future {
	if n.Type == domain.NodeHTTPRequest {
		return r.runOutbound(n, opts, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), runNodeActivity, in)
}

// Waits for a slot of the workspace's share start at a second and double
// up to shareWaitLongest.
const (
	shareWaitFirst   = time.Second
	shareWaitLongest = 10 * time.Second
)

// inShare runs an HTTP node's activity within its workspace's share of
// the external-API worker and returns the activity's result: it takes a
// slot (a local activity), waiting on a durable timer while the workspace
// holds its whole share, so a waiting node holds no worker slot; runs the
// activity; and gives the slot back on a context that cancellation cannot
// interrupt.
func (r *executionRun) inShare(ctx workflow.Context, n domain.Node, opts workflow.ActivityOptions, in RunNodeInput) (RunNodeOutput, error) {
	attempts := time.Duration(max(1, opts.RetryPolicy.MaximumAttempts))
	slot := NodeSlotInput{
		WorkspaceID: r.in.WorkspaceID, ExecutionID: r.executionID, NodeKey: r.keyPrefix() + n.Key, Share: r.share,
		Lease: attempts*(opts.StartToCloseTimeout+opts.RetryPolicy.MaximumInterval) + time.Minute,
	}
	for wait := shareWaitFirst; ; wait = min(2*wait, shareWaitLongest) {
		if err := r.historyRoom("waiting for a slot of the workspace's share for node "+in.Node.Key, 0); err != nil {
			return RunNodeOutput{}, err
		}
		var taken bool
		if err := workflow.ExecuteLocalActivity(bookkeeping(ctx), acquireNodeSlotActivity, slot).Get(ctx, &taken); err != nil {
			return RunNodeOutput{}, err
		}
		if taken {
			break
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			return RunNodeOutput{}, err
		}
	}
	var out RunNodeOutput
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), runNodeActivity, in).Get(ctx, &out)
	release, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.ExecuteLocalActivity(bookkeeping(release), releaseNodeSlotActivity, slot).Get(release, nil)
	return out, err
}

// started notes that n has its input: an upstream output it read is
// dropped once no node is left to read it.
func (r *executionRun) started(n domain.Node) {
	for _, key := range domain.ReadsOf(n).StepKeys() {
		if r.readers[key]--; r.readers[key] <= 0 {
			delete(r.outputs, key)
		}
	}
}

// nodeInput builds a node's activity input with only the parts of the
// execution input and of upstream outputs its templates read. It fails the
// node, without retries, when that is over the payload limit or when the
// history has no room for it (historyRoom decides both). A pure node's
// input carries its output's room (withOutputRoom).
func (r *executionRun) nodeInput(n domain.Node) (RunNodeInput, error) {
	in, err := r.readsInput(n)
	if err != nil {
		return RunNodeInput{}, err
	}
	if err := r.historyRoom("starting node "+n.Key, in.size); err != nil {
		return RunNodeInput{}, err
	}
	return r.withOutputRoom(in), nil
}

// readsInput is node n's activity input with the parts of the execution
// input and of the upstream outputs held that n's templates read, and its
// size: its config and that data.
func (r *executionRun) readsInput(n domain.Node) (RunNodeInput, error) {
	reads := domain.ReadsOf(n)
	in := RunNodeInput{ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID, Node: n, KeyPrefix: r.keyPrefix()}
	size := len(n.Config)
	if len(reads.Input) > 0 {
		raw, err := pickJSON(r.input, reads.Input, r.in.Input)
		if err != nil {
			return RunNodeInput{}, temporal.NewNonRetryableApplicationError("execution input: "+err.Error(), "invalid_input", nil)
		}
		in.Input = raw
		size += len(raw)
	}
	for _, key := range reads.StepKeys() {
		out, ok := r.outputs[key]
		if !ok {
			continue // not run (yet): resolving the reference says so
		}
		raw, err := pickJSON(out, reads.Steps[key], nil)
		if err != nil {
			return RunNodeInput{}, temporal.NewNonRetryableApplicationError("output of "+key+": "+err.Error(), "invalid_input", nil)
		}
		if in.Steps == nil {
			in.Steps = map[string]json.RawMessage{}
		}
		in.Steps[key] = raw
		size += len(raw)
	}
	in.size = size
	return in, nil
}

// pickJSON encodes the part of v the paths read; whole, when given, is v
// already encoded and is used when picking saves nothing.
func pickJSON(v any, paths [][]domain.PathSegment, whole json.RawMessage) (json.RawMessage, error) {
	raw, err := json.Marshal(domain.PickPaths(v, paths))
	if err != nil {
		return nil, err
	}
	if whole != nil && len(whole) <= len(raw) {
		return whole, nil
	}
	return raw, nil
}

// launchDelay runs a DELAY node as a durable timer: the wait lives in
// Temporal's history, so a worker restart resumes it rather than starting
// over. Its RUNNING record is written before the workflow waits (see
// drive); a zero delay needs no timer at all.
func (r *executionRun) launchDelay(sel workflow.Selector, n domain.Node) {
	started := r.now()
	cfg, err := domain.DecodeDelayConfig(n.Config)
	if err != nil {
		f, outcome := workflow.NewFuture(r.ctx)
		outcome.SetError(temporal.NewNonRetryableApplicationError(err.Error(), "invalid_config", nil))
		sel.AddFuture(f, func(f workflow.Future) {
			r.last = nodeOutcome{node: n, err: f.Get(r.ctx, nil), started: &started}
		})
		return
	}
	wait := cfg.Duration.Std()
	if err := r.historyRoom("starting node "+n.Key, 0); err != nil {
		f, outcome := workflow.NewFuture(r.ctx)
		outcome.SetError(err)
		sel.AddFuture(f, func(f workflow.Future) {
			r.last = nodeOutcome{node: n, err: f.Get(r.ctx, nil), started: &started}
		})
		return
	}
	if wait > 0 {
		r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: 1, StartedAt: &started})
	}
	f := workflow.NewTimer(r.ctx, wait)
	sel.AddFuture(f, func(f workflow.Future) {
		ended := r.now()
		o := nodeOutcome{node: n, err: f.Get(r.ctx, nil), started: &started, ended: &ended, attempt: 1}
		if o.err == nil {
			o.output, o.err = json.Marshal(map[string]any{"waitedMs": wait.Milliseconds()})
		}
		r.last = o
	})
}

// record queues node records for the next write, in the order they were
// decided, which is the order they are written and streamed in: a node's
// record follows those of the nodes it waited on. A record decided before
// or during a cancellation is still written: flush and finish write on
// disconnected contexts.
func (r *executionRun) record(nodes ...NodeRecordInput) {
	for _, n := range nodes {
		for _, t := range []*time.Time{n.StartedAt, n.CompletedAt} {
			if t != nil && t.After(r.clock) {
				r.clock = *t
			}
		}
		if n.Status != domain.NodeRunning && n.CompletedAt == nil {
			now := r.now()
			n.CompletedAt = &now
		}
		r.unwritten = append(r.unwritten, n)
	}
}

// now is the time the run stamps on a node's record: workflow time, but
// never before a time it has already stamped or read from a record. The
// clocks differ (workflow time is the Temporal server's at the task's
// start, a pure node's times the worker's as it ran), and a node must not
// seem to start before the nodes it waited on ended.
func (r *executionRun) now() time.Time {
	if t := workflow.Now(r.ctx); t.After(r.clock) {
		r.clock = t
	}
	return r.clock
}

// causalSpan is a pure node's start and end, read on the worker's clock,
// moved no earlier than floor, the run's clock when the node was launched
// (so no earlier than the ends of the nodes it waited on), the end no
// earlier than the start.
func causalSpan(floor time.Time, started, ended *time.Time) (*time.Time, *time.Time) {
	if started == nil || ended == nil {
		return started, ended
	}
	s, e := *started, *ended
	if s.Before(floor) {
		s = floor
	}
	if e.Before(s) {
		e = s
	}
	return &s, &e
}

// takeUnwritten returns the queued records, the last one per node (a DELAY's
// RUNNING and COMPLETED decided in one go become one COMPLETED write).
func (r *executionRun) takeUnwritten() []NodeRecordInput {
	if len(r.unwritten) == 0 {
		return nil
	}
	last := make(map[string]int, len(r.unwritten))
	for i, n := range r.unwritten {
		last[n.Key] = i
	}
	out := make([]NodeRecordInput, 0, len(last))
	for i, n := range r.unwritten {
		if last[n.Key] == i {
			out = append(out, n)
		}
	}
	r.unwritten = nil
	r.prefixKeys(out)
	return out
}

// flush writes the queued records, once the write in flight (if any) is
// done, so that writes land in the order their records were decided. A
// write is a marker in the current task, counted in its events (its
// result is empty). A failure to record is logged, not fatal: the
// execution's own status stays authoritative. on is the calling
// coroutine's context, which a blocking call must use.
func (r *executionRun) flush(on workflow.Context) {
	ctx, _ := workflow.NewDisconnectedContext(on)
	r.awaitWrite(ctx)
	nodes := r.takeUnwritten()
	if len(nodes) == 0 {
		return
	}
	r.observeTask()
	r.task.events++
	r.writing = true
	err := workflow.ExecuteLocalActivity(bookkeeping(ctx), recordNodesActivity, RecordNodesInput{ExecutionID: r.executionID, Nodes: nodes}).Get(ctx, nil)
	r.writing = false
	if err != nil {
		workflow.GetLogger(r.ctx).Warn("recording nodes failed", "execution_id", r.executionID, "error", err)
	}
}

// awaitWrite waits until no write of records is in flight.
func (r *executionRun) awaitWrite(ctx workflow.Context) {
	_ = workflow.Await(ctx, func() bool { return !r.writing })
}

// flushAsTheyEnd writes the queued records in the background while the
// workflow goes on, each write taking what was queued while the one
// before it ran: FOR_EACH iterations' records are written as iterations
// end, not when the loop does, at most one write per iteration.
func (r *executionRun) flushAsTheyEnd() {
	if r.flusher || len(r.unwritten) == 0 {
		return
	}
	r.flusher = true
	ctx, _ := workflow.NewDisconnectedContext(r.ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for len(r.unwritten) > 0 {
			r.flush(ctx)
		}
		r.flusher = false
	})
}

// cancelled records the nodes the cancellation kept from running as
// SKIPPED, the execution as CANCELLED, and ends the workflow as cancelled.
func (r *executionRun) cancelled(unrun []string) (ExecutionResult, error) {
	r.record(r.skipped(unrun, "execution cancelled")...)
	if _, err := r.finish(domain.ExecutionCancelled, "execution cancelled"); err != nil {
		return ExecutionResult{}, err
	}
	return ExecutionResult{}, temporal.NewCanceledError("execution cancelled")
}

// finish writes the queued records and the execution's final status in
// one local activity. It runs on a disconnected context: a cancellation
// arriving at the end must not stop the write that frees the execution's
// slot. The write is idempotent and retried until it succeeds, however
// long Postgres is away: a lost completion would hold the slot and
// misreport the run, a slow one only delays both.
//
// The write is tried with bookkeeping's attempts;
// if it still fails (a write Postgres refuses would fail for ever), the
// execution is recorded FAILED, naming the error, without its last node
// records: that small write is retried until it succeeds, and frees the
// slot.
func (r *executionRun) finish(status domain.ExecutionStatus, msg string) (ExecutionResult, error) {
	if r.in.Parent != nil {
		return r.finishChild(status, msg)
	}
	ctx, _ := workflow.NewDisconnectedContext(r.ctx)
	r.awaitWrite(ctx)
	in := CompleteInput{ExecutionID: r.executionID, Status: status, Error: msg, Nodes: r.takeUnwritten()}
	err := workflow.ExecuteLocalActivity(boundedCompletionWrite(ctx), completeActivity, in).Get(ctx, nil)
	if err == nil {
		return ExecutionResult{Status: status, Error: msg}, nil
	}
	failed := fmt.Sprintf("recording the execution %s failed after %d attempts, so it is recorded FAILED without its last node records: %s",
		status, completionAttempts, errorMessage(err))
	workflow.GetLogger(r.ctx).Error("completion write failed; recording the execution FAILED", "execution_id", r.executionID, "error", err)
	if err := workflow.ExecuteLocalActivity(completionWrite(ctx), completeActivity, CompleteInput{
		ExecutionID: r.executionID, Status: domain.ExecutionFailed, Error: failed,
	}).Get(ctx, nil); err != nil {
		return ExecutionResult{}, err
	}
	return ExecutionResult{Status: domain.ExecutionFailed, Error: failed}, nil
}

// skipped builds SKIPPED records for nodes that will never run.
func (r *executionRun) skipped(keys []string, reason string) []NodeRecordInput {
	out := make([]NodeRecordInput, len(keys))
	for i, k := range keys {
		out[i] = NodeRecordInput{Key: k, Type: r.types[k], Status: domain.NodeSkipped, Error: reason}
	}
	return out
}

// sortedUnion merges two key lists into one sorted list.
func sortedUnion(a, b []string) []string {
	out := append(append([]string(nil), a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// nodeTimeout is the start-to-close timeout of a node's activity: an
// HTTP node's own timeout plus room to record it, else 30 s.
func nodeTimeout(n domain.Node) time.Duration {
	if n.Type == domain.NodeHTTPRequest {
		if cfg, err := domain.DecodeHTTPRequestConfig(n.Config); err == nil {
			return cfg.Timeout.Std() + 10*time.Second
		}
	}
	return 30 * time.Second
}

// errorMessage turns an activity error into the message its activity gave,
// without the SDK's wrapping ("activity error (type: ...)"), since it is
// shown to users on the node and execution records.
func errorMessage(err error) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		msg := "timed out (" + timeout.TimeoutType().String() + ")"
		var last *temporal.ApplicationError
		if errors.As(timeout, &last) {
			msg += "; last attempt: " + last.Message()
		}
		return msg
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	if temporal.IsCanceledError(err) {
		return "cancelled"
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) && act.Unwrap() != nil {
		return act.Unwrap().Error()
	}
	return err.Error()
}
