package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Runs are the worker's use cases: what a running execution records as its
// nodes start and end, and what its end does to the execution and its
// queue item. The workflow engine's activities call them; they know
// nothing of Temporal.
type Runs struct {
	store ports.ExecutionStore
	log   *slog.Logger
	// recordValueMax bounds each value a node record keeps (see
	// domain.NodeRecord.Storable).
	recordValueMax int
	// finished counts the executions this worker ended, by status.
	finished *prometheus.CounterVec
	// workflowNodes times the nodes the workflow runs itself, by type and
	// status (observeWorkflowNodes).
	workflowNodes *prometheus.HistogramVec
	// definitions load SUB_WORKFLOW graphs (WithDefinitions).
	definitions SubWorkflowStore
	// slots keep the workspaces' shares of the external-API worker
	// (WithNodeSlots); nil grants every slot.
	slots ports.NodeSlots
	// outbound holds HTTP nodes to their workspace's host limits and
	// pauses (WithOutboundGate); nil lets every call go.
	outbound ports.OutboundGate
	// allowLists and reserved decide what TEMPORAL_WORKFLOW nodes may
	// start (WithAllowLists); nil allows nothing.
	allowLists ports.AllowLists
	reserved   domain.ReservedTaskQueues
}

// RunsOption configures Runs.
type RunsOption func(*Runs)

// WithRecordValueMax bounds, in bytes, each input, output and error a node
// record keeps; domain.DefaultRecordValueMax when not given.
func WithRecordValueMax(n int) RunsOption {
	return func(r *Runs) { r.recordValueMax = n }
}

// WithRunMetrics registers, with reg, executions_finished_total: the
// executions this worker ended, by final status, so runs' outcomes can be
// graphed and alerted on. Each status starts at zero.
func WithRunMetrics(reg prometheus.Registerer) RunsOption {
	return func(r *Runs) {
		r.finished = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "executions_finished_total",
			Help: "Executions this worker recorded as ended, by final status (COMPLETED, FAILED, CANCELLED).",
		}, []string{"status"})
		for _, s := range []domain.ExecutionStatus{domain.ExecutionCompleted, domain.ExecutionFailed, domain.ExecutionCancelled} {
			r.finished.WithLabelValues(string(s))
		}
		reg.MustRegister(r.finished)
		r.workflowNodes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "workflow_node_duration_seconds",
			Help:    "Time from start to end of the nodes the workflow runs itself rather than an executor (DELAY, FOR_EACH, WAIT_FOR_EVENT, SUB_WORKFLOW, TEMPORAL_WORKFLOW), as recorded by this worker, by node type and final status.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 14),
		}, []string{"type", "status"})
		reg.MustRegister(r.workflowNodes)
	}
}

// observeWorkflowNodes times, as their records are written, the ended
// nodes the workflow runs itself: an executor's nodes are timed by the
// executor (node_duration_seconds), these are not, and their records are
// written once, by a local activity that replay does not run again (a
// write retried after a lost answer counts twice). A record without both
// times (a node skipped or cancelled before it started) is not timed.
func (r *Runs) observeWorkflowNodes(nodes []domain.NodeRecord) {
	if r.workflowNodes == nil {
		return
	}
	for _, n := range nodes {
		if !n.Type.RunByWorkflow() || n.Status == domain.NodeRunning || n.StartedAt == nil || n.CompletedAt == nil {
			continue
		}
		r.workflowNodes.WithLabelValues(string(n.Type), string(n.Status)).Observe(n.CompletedAt.Sub(*n.StartedAt).Seconds())
	}
}

// NewRuns builds the worker's use cases over the execution store.
func NewRuns(store ports.ExecutionStore, log *slog.Logger, opts ...RunsOption) *Runs {
	r := &Runs{store: store, log: log, recordValueMax: domain.DefaultRecordValueMax}
	for _, o := range opts {
		o(r)
	}
	return r
}

// storable applies the record bound to each record: every write of a node
// record goes through it, so Postgres never refuses one and none is
// larger than the bound.
func (r *Runs) storable(nodes []domain.NodeRecord) []domain.NodeRecord {
	out := make([]domain.NodeRecord, len(nodes))
	for i, n := range nodes {
		out[i] = n.Storable(r.recordValueMax)
	}
	return out
}

// Admit is a run's first step: whether the claim it was started for
// stands (ports.ExecutionStore.AdmitRun). A run refused was started for a
// claim a peer had already released, and is logged: its item runs under a
// later claim, so this one must end without effect. A run whose item was
// cancelled before it started ends CANCELLED, so a cancel answered while
// its start was on the wire holds even if the dispatcher that sent the
// start is gone before it could cancel the workflow itself.
func (r *Runs) Admit(ctx context.Context, executionID domain.ID) (ports.Admission, error) {
	admission, err := r.store.AdmitRun(ctx, executionID)
	switch {
	case err != nil:
	case admission == ports.AdmissionRefused:
		r.log.Warn("run not admitted: its claim was released before its start landed; ending it without effect",
			"execution_id", executionID)
	case admission == ports.AdmissionCancelled:
		r.log.Info("run admitted as cancelled: its item was cancelled before its start landed", "execution_id", executionID)
	}
	return admission, err
}

// Graph loads the graph of a definition version; ports.ErrNotFound when it
// is gone, which no retry can change.
func (r *Runs) Graph(ctx context.Context, definitionID domain.ID, version int) (domain.Graph, error) {
	v, err := r.store.GetDefinitionVersion(ctx, definitionID, version)
	if err != nil {
		return domain.Graph{}, err
	}
	return v.Graph, nil
}

// retryRecordsPage is how many of the original's node records a retry
// reads at once: its memory is a page and the outputs it keeps, whatever
// the size of the run (a FOR_EACH's thousands of iteration records).
const retryRecordsPage = 256

// RetryOutputs names retryOf as the execution id retries and returns the
// outputs id reuses: those of retryOf's COMPLETED nodes
// (domain.NodeRecord.ReusableOutput), in key order while they fit in
// limit bytes together. A node whose output was truncated at the record
// bound, or past limit, is left out and so runs again. A retryOf that is
// gone is ports.ErrNotFound.
func (r *Runs) RetryOutputs(ctx context.Context, id, retryOf domain.ID, limit int) (map[string]json.RawMessage, error) {
	if err := r.store.SetRetryOf(ctx, id, retryOf); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	size := 0
	for after := ""; size < limit; {
		nodes, err := r.store.ListNodes(ctx, retryOf, retryRecordsPage, after)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			raw, ok := n.ReusableOutput()
			if !ok || size+len(raw) > limit {
				continue
			}
			size += len(raw)
			out[n.Key] = raw
		}
		if len(nodes) < retryRecordsPage {
			break
		}
		after = nodes[len(nodes)-1].Key
	}
	return out, nil
}

// NodeStarted records a node run, or a retry's new attempt, as RUNNING. A
// node that has already ended keeps its record.
func (r *Runs) NodeStarted(ctx context.Context, executionID domain.ID, n domain.NodeRecord) error {
	n.Status = domain.NodeRunning
	return r.store.StartNode(ctx, executionID, n.Storable(r.recordValueMax))
}

// NodeFinished records how a node run ended.
func (r *Runs) NodeFinished(ctx context.Context, executionID domain.ID, n domain.NodeRecord) error {
	return r.store.FinishNode(ctx, executionID, n.Storable(r.recordValueMax))
}

// RecordNodes writes records the workflow decided (pure nodes, failures
// after retries, skipped and cancelled nodes, timers) in one batch. An
// execution that is gone is logged, not an error: its workflow's result
// stays authoritative, and retrying cannot bring the row back.
func (r *Runs) RecordNodes(ctx context.Context, executionID domain.ID, nodes []domain.NodeRecord) error {
	if len(nodes) == 0 {
		return nil
	}
	if err := r.store.RecordNodes(ctx, executionID, r.storable(nodes)); err != nil {
		if errors.Is(err, ports.ErrNotFound) {
			r.log.Warn("execution missing while recording nodes", "execution_id", executionID)
			return nil
		}
		return err
	}
	r.observeWorkflowNodes(nodes)
	return nil
}

// Complete records an execution's end with its last node records and
// ends its queue item (queue.AtEnd), in one transaction. It is
// idempotent: an execution that is not RUNNING, or missing, is logged and
// its item ended all the same, so no item outlives its workflow.
func (r *Runs) Complete(ctx context.Context, executionID domain.ID, status domain.ExecutionStatus, errMsg string, nodes ...domain.NodeRecord) error {
	found, err := queue.FinishExecution(ctx, r.store, r.log, executionID, status, errMsg, r.recordValueMax, r.storable(nodes)...)
	if err != nil {
		return err
	}
	if !found {
		r.log.Warn("execution not RUNNING or missing at completion; nothing recorded", "execution_id", executionID, "status", status)
		return nil
	}
	if r.finished != nil {
		r.finished.WithLabelValues(string(status)).Inc()
	}
	r.observeWorkflowNodes(nodes)
	return nil
}
