package engine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// memStore is an in-memory ports.ExecutionStore keeping the port's
// contract (porttest.ExecutionStore, which runs against it and against the
// Postgres store): one record per node, a late StartNode never reopens a
// node that ended COMPLETED, SKIPPED or CANCELLED, FinishExecution only
// ends a RUNNING execution and persists what atEnd decides for its queue
// item. It also keeps every FinishExecution call, so tests can check what
// the workflow asked for and not just the final row.
type memStore struct {
	mu       sync.Mutex
	versions map[string]domain.Graph // "<definition>/<version>"
	// definitions are those SUB_WORKFLOWs run (addDefinition).
	definitions map[domain.ID]domain.Definition
	executions  map[domain.ID]*memExecution
	// items holds each run's queue item by execution id.
	items map[domain.ID]*domain.QueueItem
	// released holds the items whose claim was released: they have no
	// execution id.
	released    []*domain.QueueItem
	completions []completion
	// beforeLoad and beforeFinish, when set, run at the start of
	// GetDefinitionVersion and FinishExecution, so tests can act (cancel
	// the workflow, say) while the activity using them runs.
	beforeLoad, beforeFinish func()
	// refuseFinish, when set, is FinishExecution's error for a status,
	// as a write Postgres refuses would be.
	refuseFinish func(domain.ExecutionStatus) error
	// subWorkflowQuota is every workspace's subWorkflowNodes (FREE's
	// default when 0), and subWorkflowNodes each execution's count.
	subWorkflowQuota int
	subWorkflowNodes map[domain.ID]int
	// writes are the record writes that change a node's status or
	// attempt, in the order they were made: what the Postgres feed's
	// trigger turns into node.started and node.finished events.
	writes []memWrite
}

// memWrite is one write of a node record, as the stream would tell it.
type memWrite struct {
	Execution domain.ID
	Record    domain.NodeRecord
}

// wrote notes the write of rec over old (exists when there was one), as
// the feed's trigger does: only a change of status or attempt is told.
func (s *memStore) wrote(executionID domain.ID, old domain.NodeRecord, exists bool, rec domain.NodeRecord) {
	if exists && old.Status == rec.Status && old.Attempt == rec.Attempt {
		return
	}
	s.writes = append(s.writes, memWrite{Execution: executionID, Record: rec})
}

type memExecution struct {
	status domain.ExecutionStatus
	err    *string
	nodes  map[string]domain.NodeRecord
}

// completion is one FinishExecution call.
type completion struct {
	ID     domain.ID
	Status domain.ExecutionStatus
	Error  string
}

var _ ports.ExecutionStore = (*memStore)(nil)

// SetRetryOf is not kept (the workflow tests check records, not links),
// but refuses a link to or from an execution that is not stored, as the
// Postgres store does.
func (s *memStore) SetRetryOf(_ context.Context, id, retryOf domain.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.executions[id]
	_, of := s.executions[retryOf]
	if !ok || !of {
		return ports.ErrNotFound
	}
	return nil
}

// ListNodes pages through an execution's records in key order.
func (s *memStore) ListNodes(_ context.Context, executionID domain.ID, limit int, afterKey string) ([]domain.NodeRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var page []domain.NodeRecord
	if e, ok := s.executions[executionID]; ok { // a missing one has no records, as in Postgres
		for _, n := range e.nodes {
			if n.Key > afterKey {
				page = append(page, n)
			}
		}
	}
	slices.SortFunc(page, func(a, b domain.NodeRecord) int { return cmp.Compare(a.Key, b.Key) })
	return page[:min(len(page), limit)], nil
}

// RecordNodes applies StartNode or FinishNode to each record.
func (s *memStore) RecordNodes(_ context.Context, executionID domain.ID, nodes []domain.NodeRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordNodes(executionID, nodes)
}

func (s *memStore) recordNodes(executionID domain.ID, nodes []domain.NodeRecord) error {
	for _, n := range nodes {
		var err error
		if n.Status == domain.NodeRunning {
			err = s.startNode(executionID, n)
		} else {
			err = s.finishNode(executionID, n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func newMemStore() *memStore {
	return &memStore{versions: map[string]domain.Graph{}, executions: map[domain.ID]*memExecution{}, items: map[domain.ID]*domain.QueueItem{}}
}

// addDefinition stores definition id of workspace ws at version 1 with
// graph, for SUB_WORKFLOWs to run.
func (s *memStore) addDefinition(id, ws domain.ID, g domain.Graph) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.definitions == nil {
		s.definitions = map[domain.ID]domain.Definition{}
	}
	s.definitions[id] = domain.Definition{ID: id, WorkspaceID: ws, CurrentVersion: 1, Graph: g}
	s.versions[fmt.Sprintf("%s/%d", id, 1)] = g
}

// WorkspaceQuotas gives every workspace subWorkflowQuota, the one figure
// the runs read.
func (s *memStore) WorkspaceQuotas(context.Context, domain.ID) (domain.PlanQuotas, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return domain.PlanQuotas{SubWorkflowNodes: cmp.Or(s.subWorkflowQuota, 100)}, nil
}

// TakeSubWorkflowNodes counts nodes against limit, as the Postgres store's
// atomic update does.
func (s *memStore) TakeSubWorkflowNodes(_ context.Context, executionID domain.ID, nodes, limit int) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subWorkflowNodes == nil {
		s.subWorkflowNodes = map[domain.ID]int{}
	}
	held := s.subWorkflowNodes[executionID]
	if held+nodes > limit {
		return held, false, nil
	}
	s.subWorkflowNodes[executionID] = held + nodes
	return held, true, nil
}

// GetDefinition returns a definition addDefinition stored.
func (s *memStore) GetDefinition(_ context.Context, id domain.ID) (domain.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.definitions[id]
	if !ok {
		return domain.Definition{}, ports.ErrNotFound
	}
	return d, nil
}

// addRun stores a definition version with graph and a RUNNING execution of
// it whose queue item is DISPATCHED, as the dispatcher would have, and
// returns the item's id.
func (s *memStore) addRun(definitionID, executionID domain.ID, version int, g domain.Graph) domain.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[fmt.Sprintf("%s/%d", definitionID, version)] = g
	s.executions[executionID] = &memExecution{status: domain.ExecutionRunning, nodes: map[string]domain.NodeRecord{}}
	now := time.Now()
	item := &domain.QueueItem{ID: domain.ID(uuid.New()), DefinitionID: definitionID, ExecutionID: &executionID,
		QueueState: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now, AvailableAt: now}}
	s.items[executionID] = item
	return item.ID
}

// AdmitRun admits the run while its execution is kept, marking its item
// DISPATCHED if it is still CLAIMED, as the Postgres store does.
func (s *memStore) AdmitRun(_ context.Context, id domain.ID) (ports.Admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	item, hasItem := s.items[id]
	if hasItem && item.Status == domain.QueueClaimed {
		now := time.Now()
		item.Status, item.ClaimedAt, item.DispatchedAt = domain.QueueDispatched, nil, &now
	}
	switch _, ok := s.executions[id]; {
	case !ok:
		return ports.AdmissionRefused, nil
	case hasItem && item.Status == domain.QueueCancelled:
		return ports.AdmissionCancelled, nil
	default:
		return ports.AdmissionGranted, nil
	}
}

// addClaimedRun is addRun with the item still CLAIMED.
func (s *memStore) addClaimedRun(definitionID, executionID domain.ID, version int, g domain.Graph) domain.ID {
	id := s.addRun(definitionID, executionID, version, g)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	item := s.items[executionID]
	item.Status, item.ClaimedAt, item.DispatchedAt = domain.QueueClaimed, &now, nil
	return id
}

// release releases the claim of execution executionID as the Postgres
// store's release does: the item goes back to PENDING without its
// execution id, and the execution is dropped.
func (s *memStore) release(executionID domain.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	item := s.items[executionID]
	item.Status, item.ClaimedAt, item.ExecutionID = domain.QueuePending, nil, nil
	delete(s.items, executionID)
	delete(s.executions, executionID)
	s.released = append(s.released, item)
}

// queueItem returns the queue item with id, and whether there is one.
func (s *memStore) queueItem(id domain.ID) (domain.QueueItem, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range append(slices.Collect(maps.Values(s.items)), s.released...) {
		if q.ID == id {
			return *q, true
		}
	}
	return domain.QueueItem{}, false
}

func (s *memStore) GetExecution(_ context.Context, id domain.ID) (domain.Execution, []domain.NodeRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[id]
	if !ok {
		return domain.Execution{}, nil, ports.ErrNotFound
	}
	nodes := make([]domain.NodeRecord, 0, len(e.nodes))
	for _, n := range e.nodes {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b domain.NodeRecord) int { return cmp.Compare(a.Key, b.Key) })
	return domain.Execution{ID: id, Status: e.status, Error: e.err}, nodes, nil
}

func (s *memStore) GetDefinitionVersion(_ context.Context, definitionID domain.ID, version int) (domain.DefinitionVersion, error) {
	if s.beforeLoad != nil {
		s.beforeLoad()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.versions[fmt.Sprintf("%s/%d", definitionID, version)]
	if !ok {
		return domain.DefinitionVersion{}, ports.ErrNotFound
	}
	return domain.DefinitionVersion{DefinitionID: definitionID, Version: version, Graph: g}, nil
}

func (s *memStore) StartNode(_ context.Context, executionID domain.ID, n domain.NodeRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startNode(executionID, n)
}

func (s *memStore) startNode(executionID domain.ID, n domain.NodeRecord) error {
	e, ok := s.executions[executionID]
	if !ok {
		return ports.ErrNotFound
	}
	old, exists := e.nodes[n.Key]
	if exists && (old.Status != domain.NodeRunning && old.Status != domain.NodeFailed || old.Attempt > max(1, n.Attempt)) {
		return nil
	}
	rec := domain.NodeRecord{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: max(1, n.Attempt), Input: n.Input, StartedAt: n.StartedAt}
	if exists && old.StartedAt != nil {
		rec.StartedAt = old.StartedAt
	}
	if rec.StartedAt == nil {
		now := time.Now()
		rec.StartedAt = &now
	}
	s.wrote(executionID, old, exists, rec)
	e.nodes[n.Key] = rec
	return nil
}

func (s *memStore) FinishNode(_ context.Context, executionID domain.ID, n domain.NodeRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[executionID]
	if !ok {
		return ports.ErrNotFound
	}
	if old, exists := e.nodes[n.Key]; exists && (old.Status != domain.NodeRunning || old.Attempt > max(1, n.Attempt)) {
		return nil
	}
	return s.finishNode(executionID, n)
}

func (s *memStore) finishNode(executionID domain.ID, n domain.NodeRecord) error {
	e, ok := s.executions[executionID]
	if !ok {
		return ports.ErrNotFound
	}
	rec := n
	rec.Attempt = max(1, n.Attempt)
	old, exists := e.nodes[n.Key]
	if exists {
		rec.Attempt = max(rec.Attempt, old.Attempt)
		if old.StartedAt != nil {
			rec.StartedAt = old.StartedAt
		}
		if len(rec.Input) == 0 {
			rec.Input = old.Input
		}
	}
	if rec.CompletedAt == nil {
		now := time.Now()
		rec.CompletedAt = &now
	}
	s.wrote(executionID, old, exists, rec)
	e.nodes[n.Key] = rec
	return nil
}

// FinishExecution does all it writes at once, under the lock, as the
// Postgres store does in one transaction: atEnd decides on a copy of the
// item before anything changes.
func (s *memStore) FinishExecution(_ context.Context, id domain.ID, status domain.ExecutionStatus, errMsg *string, atEnd ports.ItemAtEndFunc, nodes ...domain.NodeRecord) (bool, error) {
	if s.beforeFinish != nil {
		s.beforeFinish()
	}
	if s.refuseFinish != nil {
		if err := s.refuseFinish(status); err != nil {
			return false, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := completion{ID: id, Status: status}
	if errMsg != nil {
		c.Error = *errMsg
	}
	s.completions = append(s.completions, c)
	item, hasItem := s.items[id]
	var next domain.QueueItem
	decision := ports.KeepItem
	if hasItem {
		next = *item
		var err error
		if decision, err = atEnd(&next); err != nil {
			return false, err
		}
	}
	e, ok := s.executions[id]
	found := ok && e.status == domain.ExecutionRunning
	if found {
		if err := s.recordNodes(id, nodes); err != nil {
			return false, err
		}
		var reason string
		if errMsg != nil {
			reason = *errMsg
		}
		left, leftErr := domain.LeftRunning(status, reason)
		for key, n := range e.nodes {
			if n.Status == domain.NodeRunning {
				n.Status, n.Error = left, &leftErr
				e.nodes[key] = n
			}
		}
		e.status, e.err = status, errMsg
	}
	switch decision {
	case ports.WriteItem:
		*item = next
	case ports.DeleteItem:
		delete(s.items, id)
	}
	return found, nil
}

// node returns one node record, and whether there is one.
func (s *memStore) node(executionID domain.ID, key string) (domain.NodeRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[executionID]
	if !ok {
		return domain.NodeRecord{}, false
	}
	n, ok := e.nodes[key]
	return n, ok
}

// statuses maps each recorded node to its status.
func (s *memStore) statuses(executionID domain.ID) map[string]domain.NodeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]domain.NodeStatus{}
	e, ok := s.executions[executionID]
	if !ok {
		return out
	}
	for k, n := range e.nodes {
		out[k] = n.Status
	}
	return out
}

// finished returns the FinishExecution calls made so far.
func (s *memStore) finished() []completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.completions)
}

func TestMemStoreKeepsTheExecutionStoreContract(t *testing.T) {
	t.Parallel()
	porttest.ExecutionStore(t, func(t *testing.T) porttest.ExecutionStoreFixture {
		s := newMemStore()
		return porttest.ExecutionStoreFixture{
			Store: s,
			NewRun: func(_ *testing.T, g domain.Graph) porttest.Run {
				run := porttest.Run{ExecutionID: domain.ID(uuid.New()), DefinitionID: domain.ID(uuid.New()), Version: 1}
				run.QueueID = s.addRun(run.DefinitionID, run.ExecutionID, run.Version, g)
				return run
			},
			NewClaimedRun: func(_ *testing.T, g domain.Graph) porttest.Run {
				run := porttest.Run{ExecutionID: domain.ID(uuid.New()), DefinitionID: domain.ID(uuid.New()), Version: 1}
				run.QueueID = s.addClaimedRun(run.DefinitionID, run.ExecutionID, run.Version, g)
				return run
			},
			Release: func(_ *testing.T, run porttest.Run) { s.release(run.ExecutionID) },
			Cancel: func(t *testing.T, run porttest.Run) {
				s.mu.Lock()
				defer s.mu.Unlock()
				if err := s.items[run.ExecutionID].Cancel(); err != nil {
					t.Fatal(err)
				}
			},
			QueueItem: func(_ *testing.T, id domain.ID) (domain.QueueItem, bool) { return s.queueItem(id) },
			Execution: func(t *testing.T, id domain.ID) domain.Execution {
				e, _, err := s.GetExecution(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				return e
			},
		}
	})
}
