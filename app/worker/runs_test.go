package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runStore is an ExecutionStore fake that records what the use cases ask
// of it and answers as told.
type runStore struct {
	ports.ExecutionStore
	started, finished, recorded []domain.NodeRecord
	recordErr                   error
	found                       bool
	status                      domain.ExecutionStatus
	errMsg                      *string
	item                        domain.QueueItem
	itemAtEnd                   ports.ItemAtEnd
}

func (s *runStore) StartNode(_ context.Context, _ domain.ID, n domain.NodeRecord) error {
	s.started = append(s.started, n)
	return nil
}

func (s *runStore) FinishNode(_ context.Context, _ domain.ID, n domain.NodeRecord) error {
	s.finished = append(s.finished, n)
	return nil
}

func (s *runStore) RecordNodes(_ context.Context, _ domain.ID, nodes []domain.NodeRecord) error {
	s.recorded = append(s.recorded, nodes...)
	return s.recordErr
}

func (s *runStore) FinishExecution(_ context.Context, _ domain.ID, status domain.ExecutionStatus, errMsg *string, atEnd ports.ItemAtEndFunc, nodes ...domain.NodeRecord) (bool, error) {
	s.status, s.errMsg, s.recorded = status, errMsg, append(s.recorded, nodes...)
	var err error
	s.itemAtEnd, err = atEnd(&s.item)
	return s.found, err
}

func TestRunsRecordANodeStartAsRunning(t *testing.T) {
	t.Parallel()
	store := &runStore{}
	runs := NewRuns(store, discard())
	if err := runs.NodeStarted(context.Background(), domain.ID(uuid.New()), domain.NodeRecord{Key: "a", Status: domain.NodeCompleted}); err != nil {
		t.Fatal(err)
	}
	if len(store.started) != 1 || store.started[0].Status != domain.NodeRunning {
		t.Errorf("started %+v, want one RUNNING record", store.started)
	}
}

func TestRunsRecordNodesOfAVanishedExecutionWithoutFailing(t *testing.T) {
	t.Parallel()
	store := &runStore{recordErr: ports.ErrNotFound}
	runs := NewRuns(store, discard())
	if err := runs.RecordNodes(context.Background(), domain.ID(uuid.New()), []domain.NodeRecord{{Key: "a"}}); err != nil {
		t.Errorf("recording for a vanished execution: %v, want nil", err)
	}
	store.recordErr = errors.New("connection refused")
	if err := runs.RecordNodes(context.Background(), domain.ID(uuid.New()), []domain.NodeRecord{{Key: "a"}}); err == nil {
		t.Error("a store failure was swallowed; the activity must retry it")
	}
	store.recorded = nil
	if err := runs.RecordNodes(context.Background(), domain.ID(uuid.New()), nil); err != nil || store.recorded != nil {
		t.Errorf("recording nothing: %v, %d records", err, len(store.recorded))
	}
}

func TestRunsCountEachExecutionTheyEndOnceByStatus(t *testing.T) {
	t.Parallel()
	now := time.Now()
	reg := prometheus.NewRegistry()
	store := &runStore{found: true, item: domain.QueueItem{QueueState: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now}}}
	runs := NewRuns(store, discard(), WithRunMetrics(reg))
	if err := runs.Complete(context.Background(), domain.ID(uuid.New()), domain.ExecutionFailed, "node a failed"); err != nil {
		t.Fatal(err)
	}
	// A repeat of a completion already written finds nothing RUNNING and
	// is not counted again.
	store.found = false
	if err := runs.Complete(context.Background(), domain.ID(uuid.New()), domain.ExecutionFailed, "node a failed"); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP executions_finished_total Executions this worker recorded as ended, by final status (COMPLETED, FAILED, CANCELLED).
# TYPE executions_finished_total counter
executions_finished_total{status="CANCELLED"} 0
executions_finished_total{status="COMPLETED"} 0
executions_finished_total{status="FAILED"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "executions_finished_total"); err != nil {
		t.Error(err)
	}
}

func TestRunsBoundTheExecutionErrorAtTheConfiguredRecordBound(t *testing.T) {
	t.Parallel()
	now := time.Now()
	long := strings.Repeat("e", 3*domain.DefaultRecordValueMax)
	for _, tc := range []struct {
		name string
		opts []RunsOption
		max  int
	}{
		{name: "default", max: domain.DefaultRecordValueMax},
		{name: "configured above the default", opts: []RunsOption{WithRecordValueMax(2 * domain.DefaultRecordValueMax)}, max: 2 * domain.DefaultRecordValueMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &runStore{found: true, item: domain.QueueItem{QueueState: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now}}}
			if err := NewRuns(store, discard(), tc.opts...).Complete(context.Background(), domain.ID(uuid.New()), domain.ExecutionFailed, long); err != nil {
				t.Fatal(err)
			}
			if store.errMsg == nil || *store.errMsg != domain.BoundedText(long, tc.max) || len(*store.errMsg) <= tc.max/2 || len(*store.errMsg) > tc.max {
				t.Errorf("stored an error of %d bytes, want it bounded at %d", len(*store.errMsg), tc.max)
			}
		})
	}
}

func TestRunsCompleteEndsTheItemByTheOutcome(t *testing.T) {
	t.Parallel()
	now := time.Now()
	store := &runStore{found: true, item: domain.QueueItem{QueueState: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now}}}
	runs := NewRuns(store, discard())
	err := runs.Complete(context.Background(), domain.ID(uuid.New()), domain.ExecutionFailed, "node a failed",
		domain.NodeRecord{Key: "a", Status: domain.NodeFailed})
	if err != nil {
		t.Fatal(err)
	}
	if store.status != domain.ExecutionFailed || store.errMsg == nil || *store.errMsg != "node a failed" || len(store.recorded) != 1 {
		t.Errorf("finished %s (%v) with %d records", store.status, store.errMsg, len(store.recorded))
	}
	if store.itemAtEnd != ports.WriteItem || store.item.Status != domain.QueueFailed || store.item.LastError != "node a failed" {
		t.Errorf("item at end %d to %+v, want FAILED with the reason written", store.itemAtEnd, store.item.QueueState)
	}

	// A completion without an error records none, and a repeat (not
	// found) is not a failure.
	store = &runStore{item: domain.QueueItem{QueueState: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now}}}
	if err := NewRuns(store, discard()).Complete(context.Background(), domain.ID(uuid.New()), domain.ExecutionCompleted, ""); err != nil {
		t.Fatal(err)
	}
	if store.errMsg != nil || store.itemAtEnd != ports.DeleteItem {
		t.Errorf("completion: error %v, item at end %d; want none and delete", store.errMsg, store.itemAtEnd)
	}
}

// retryRecords is an ExecutionStore fake holding one original's node
// records, paged as the port says, and counting the widest page asked.
type retryRecords struct {
	ports.ExecutionStore
	nodes      []domain.NodeRecord // in key order
	widest     int
	pages      int
	linkedGone bool
}

func (s *retryRecords) SetRetryOf(context.Context, domain.ID, domain.ID) error {
	if s.linkedGone {
		return ports.ErrNotFound
	}
	return nil
}

func (s *retryRecords) ListNodes(_ context.Context, _ domain.ID, limit int, after string) ([]domain.NodeRecord, error) {
	s.pages++
	s.widest = max(s.widest, limit)
	i, _ := slices.BinarySearchFunc(s.nodes, after, func(n domain.NodeRecord, k string) int { return strings.Compare(n.Key, k) })
	for i < len(s.nodes) && s.nodes[i].Key <= after {
		i++
	}
	return s.nodes[i:min(len(s.nodes), i+limit)], nil
}

// TestARetryReadsItsOriginalsRecordsAPageAtATime: an original with
// thousands of records (a FOR_EACH's iterations) is read in pages of
// retryRecordsPage, never whole, and the outputs kept are the COMPLETED
// ones that fit the limit, in key order, as before.
func TestARetryReadsItsOriginalsRecordsAPageAtATime(t *testing.T) {
	t.Parallel()
	store := &retryRecords{}
	for i := range 5 * retryRecordsPage {
		n := domain.NodeRecord{Key: fmt.Sprintf("n%05d", i), Status: domain.NodeCompleted, Output: json.RawMessage(`"0123456789"`)}
		if i%2 == 1 {
			n.Status = domain.NodeFailed
		}
		store.nodes = append(store.nodes, n)
	}
	runs := NewRuns(store, discard())
	// Room for 300 outputs of 12 bytes: the first 300 COMPLETED nodes.
	out, err := runs.RetryOutputs(context.Background(), domain.ID(uuid.New()), domain.ID(uuid.New()), 300*12)
	if err != nil {
		t.Fatal(err)
	}
	if store.widest > retryRecordsPage {
		t.Errorf("read a page of %d records, want at most %d", store.widest, retryRecordsPage)
	}
	if len(out) != 300 || out["n00000"] == nil || out["n00598"] == nil || out["n00600"] != nil || out["n00001"] != nil {
		t.Errorf("kept %d outputs, want the 300 COMPLETED ones from n00000 to n00598", len(out))
	}
	if store.pages > 3 {
		t.Errorf("read %d pages, want to stop once the limit was full (3)", store.pages)
	}
	store.linkedGone = true
	if _, err := runs.RetryOutputs(context.Background(), domain.ID(uuid.New()), domain.ID(uuid.New()), 100); !errors.Is(err, ports.ErrNotFound) {
		t.Errorf("an original that is gone: %v, want ErrNotFound", err)
	}
}

func TestRunsTimeTheNodesTheWorkflowRunsItselfByTypeAndStatus(t *testing.T) {
	t.Parallel()
	now := time.Now()
	reg := prometheus.NewRegistry()
	store := &runStore{found: true, item: domain.QueueItem{QueueState: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now}}}
	runs := NewRuns(store, discard(), WithRunMetrics(reg))
	started, ended := now.Add(-2*time.Second), now
	msg := "no worker"
	if err := runs.RecordNodes(context.Background(), domain.ID(uuid.New()), []domain.NodeRecord{
		{Key: "team", Type: domain.NodeTemporalWorkflow, Status: domain.NodeRunning, StartedAt: &started},
		{Key: "http", Type: domain.NodeHTTPRequest, Status: domain.NodeFailed, StartedAt: &started, CompletedAt: &ended},
		{Key: "skipped", Type: domain.NodeDelay, Status: domain.NodeSkipped},
	}); err != nil {
		t.Fatal(err)
	}
	if err := runs.Complete(context.Background(), domain.ID(uuid.New()), domain.ExecutionFailed, "node team failed",
		domain.NodeRecord{Key: "team", Type: domain.NodeTemporalWorkflow, Status: domain.NodeFailed, Error: &msg, StartedAt: &started, CompletedAt: &ended}); err != nil {
		t.Fatal(err)
	}
	// Only the ended TEMPORAL_WORKFLOW is timed: a RUNNING record has not
	// ended, the executor times its HTTP node, a skipped DELAY never ran.
	if n := testutil.CollectAndCount(reg, "workflow_node_duration_seconds"); n != 1 {
		t.Fatalf("%d series of workflow_node_duration_seconds, want 1", n)
	}
	got, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var sum float64
	for _, mf := range got {
		if mf.GetName() != "workflow_node_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["type"] != "TEMPORAL_WORKFLOW" || labels["status"] != "FAILED" {
				t.Errorf("series %v, want TEMPORAL_WORKFLOW FAILED", labels)
			}
			count, sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	if count != 1 || sum < 1.9 || sum > 2.1 {
		t.Errorf("observed %d nodes summing %.2f s, want one of 2 s", count, sum)
	}
}
