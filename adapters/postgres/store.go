package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// IdempotencyRetention is how long an Idempotency-Key is honoured.
const IdempotencyRetention = 24 * time.Hour

func workspaceFromRow(r dbsqlc.Workspace) domain.Workspace {
	return domain.Workspace{ID: r.ID, Name: r.Name, Plan: domain.Plan(r.Plan), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// CreateWorkspace inserts a workspace.
func (s *Store) CreateWorkspace(ctx context.Context, w domain.Workspace) (domain.Workspace, error) {
	r, err := s.q.WorkspaceInsert(ctx, s.pool, dbsqlc.WorkspaceInsertParams{ID: w.ID, Name: w.Name, Plan: string(w.Plan)})
	if err != nil {
		return domain.Workspace{}, interpretError(err)
	}
	return workspaceFromRow(r), nil
}

// GetWorkspace loads a workspace.
func (s *Store) GetWorkspace(ctx context.Context, id domain.ID) (domain.Workspace, error) {
	r, err := s.q.WorkspaceGet(ctx, s.pool, id)
	if err != nil {
		return domain.Workspace{}, interpretError(err)
	}
	return workspaceFromRow(r), nil
}

// WorkspaceStats counts each workspace's slots in use, waiting items and
// recent failures, in one statement however many workspaces there are.
func (s *Store) WorkspaceStats(ctx context.Context, ids []domain.ID) (map[domain.ID]domain.WorkspaceStats, error) {
	rows, err := s.q.WorkspaceStats(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[domain.ID]domain.WorkspaceStats, len(rows))
	for _, r := range rows {
		out[r.ID] = domain.WorkspaceStats{Limit: int(r.MaxRunning), Active: int(r.Active), Queued: int(r.Queued), FailedLastHour: int(r.FailedLastHour)}
	}
	return out, nil
}

// ListWorkspaces pages through all workspaces by id.
func (s *Store) ListWorkspaces(ctx context.Context, page ports.Page) ([]domain.Workspace, error) {
	rows, err := s.q.WorkspaceList(ctx, s.pool, dbsqlc.WorkspaceListParams{After: page.After, MaxRows: int32(page.Limit)})
	if err != nil {
		return nil, err
	}
	out := make([]domain.Workspace, len(rows))
	for i, r := range rows {
		out[i] = workspaceFromRow(r)
	}
	return out, nil
}

// UpdateWorkspacePlan changes a workspace's plan under the limits' write
// lock once check has passed under it, and wakes the dispatchers, as
// SetWorkspaceLimits does: a plan is the limits a workspace has none of
// its own of.
func (s *Store) UpdateWorkspacePlan(ctx context.Context, id domain.ID, plan domain.Plan, check ports.LimitsCheck) (domain.Workspace, error) {
	var out domain.Workspace
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockLimitsAndCheck(ctx, tx, &id, check); err != nil {
			return err
		}
		r, err := s.q.WorkspaceUpdatePlan(ctx, tx, dbsqlc.WorkspaceUpdatePlanParams{ID: id, Plan: string(plan)})
		if err != nil {
			return interpretError(err)
		}
		out = workspaceFromRow(r)
		wakeAfterCommit(tx, QueueChannel)
		return nil
	})
	return out, err
}

// CreateAPIKey stores a key's hash.
func (s *Store) CreateAPIKey(ctx context.Context, k domain.APIKey, secretHash []byte) (domain.APIKey, error) {
	r, err := s.q.APIKeyInsert(ctx, s.pool, dbsqlc.APIKeyInsertParams{
		ID: k.ID, WorkspaceID: k.WorkspaceID, Name: k.Name, Prefix: k.Prefix, SecretHash: secretHash,
	})
	if err != nil {
		return domain.APIKey{}, interpretError(err)
	}
	return domain.APIKey{ID: r.ID, WorkspaceID: r.WorkspaceID, Name: r.Name, Prefix: r.Prefix, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}, nil
}

// ListAPIKeys lists a workspace's keys.
func (s *Store) ListAPIKeys(ctx context.Context, workspaceID domain.ID) ([]domain.APIKey, error) {
	rows, err := s.q.APIKeyList(ctx, s.pool, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]domain.APIKey, len(rows))
	for i, r := range rows {
		out[i] = domain.APIKey{ID: r.ID, WorkspaceID: r.WorkspaceID, Name: r.Name, Prefix: r.Prefix, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
	}
	return out, nil
}

// RevokeAPIKey revokes a key; revoking twice is a no-op.
func (s *Store) RevokeAPIKey(ctx context.Context, workspaceID, keyID domain.ID) error {
	n, err := s.q.APIKeyRevoke(ctx, s.pool, dbsqlc.APIKeyRevokeParams{ID: keyID, WorkspaceID: workspaceID})
	if err != nil {
		return err
	}
	if n == 0 {
		return ports.ErrNotFound
	}
	return nil
}

// APIKeyBySecretHash finds a key by its secret's hash.
func (s *Store) APIKeyBySecretHash(ctx context.Context, hash []byte) (domain.APIKey, error) {
	r, err := s.q.APIKeyBySecretHash(ctx, s.pool, hash)
	if err != nil {
		return domain.APIKey{}, interpretError(err)
	}
	return domain.APIKey{ID: r.ID, WorkspaceID: r.WorkspaceID, Name: r.Name, Prefix: r.Prefix, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}, nil
}

// CreateDefinition stores a definition and its version 1 together, within
// the workspace's definitions and versions quotas.
func (s *Store) CreateDefinition(ctx context.Context, d domain.Definition) (domain.Definition, error) {
	graph, err := graphJSON(d.Graph)
	if err != nil {
		return domain.Definition{}, err
	}
	var out domain.Definition
	txErr := s.withTx(ctx, func(tx pgx.Tx) error {
		quotas, counts, err := s.lockDefinitionStorage(ctx, tx, d.WorkspaceID)
		if err != nil {
			return err
		}
		if err = quotas.CheckDefinitions(int(counts.Definitions)); err != nil {
			return err
		}
		if err = quotas.CheckDefinitionVersions(int(counts.Versions)); err != nil {
			return err
		}
		r, err := s.q.DefinitionInsert(ctx, tx, dbsqlc.DefinitionInsertParams{ID: d.ID, WorkspaceID: d.WorkspaceID, Name: d.Name})
		if err != nil {
			return interpretError(err)
		}
		if _, err := s.q.DefinitionVersionInsert(ctx, tx, dbsqlc.DefinitionVersionInsertParams{
			WorkflowDefinitionID: r.ID, Version: 1, Graph: graph,
		}); err != nil {
			return err
		}
		if err := s.insertPins(ctx, tx, r.ID, 1, d.Graph); err != nil {
			return err
		}
		out = definitionFromRow(r, d.Graph)
		return nil
	})
	return out, txErr
}

// insertPins writes the child versions a new version's SUB_WORKFLOW nodes
// pin, so retention keeps them while the version is stored. A pinned
// version that is gone (deleted since the save-time check read it) fails
// the save with the foreign key, as a missing child should.
func (s *Store) insertPins(ctx context.Context, tx pgx.Tx, definition domain.ID, version int32, g domain.Graph) error {
	pins := g.PinnedVersions()
	if len(pins) == 0 {
		return nil
	}
	p := dbsqlc.DefinitionVersionPinsInsertParams{WorkflowDefinitionID: definition, Version: version}
	for _, pin := range pins {
		p.ChildDefinitionIds = append(p.ChildDefinitionIds, pin.Definition)
		p.ChildVersions = append(p.ChildVersions, int32(pin.Version))
	}
	return interpretError(s.q.DefinitionVersionPinsInsert(ctx, tx, p))
}

func definitionFromRow(r dbsqlc.WorkflowDefinition, g domain.Graph) domain.Definition {
	return domain.Definition{
		ID: r.ID, WorkspaceID: r.WorkspaceID, Name: r.Name, CurrentVersion: int(r.CurrentVersion),
		Graph: g, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// GetDefinition loads a live definition with its current graph.
func (s *Store) GetDefinition(ctx context.Context, id domain.ID) (domain.Definition, error) {
	r, err := s.q.DefinitionGet(ctx, s.pool, id)
	if err != nil {
		return domain.Definition{}, interpretError(err)
	}
	return s.withGraph(ctx, r)
}

// lockDefinitionStorage takes the workspace's storage lock for the rest
// of tx and returns its quotas in force and what it stores.
func (s *Store) lockDefinitionStorage(ctx context.Context, tx pgx.Tx, workspaceID domain.ID) (domain.PlanQuotas, dbsqlc.DefinitionStorageCountsRow, error) {
	if _, err := s.q.WorkspaceStorageLock(ctx, tx, workspaceID); err != nil {
		return domain.PlanQuotas{}, dbsqlc.DefinitionStorageCountsRow{}, interpretError(err)
	}
	quotas, err := s.workspaceQuotas(ctx, tx, workspaceID)
	if err != nil {
		return domain.PlanQuotas{}, dbsqlc.DefinitionStorageCountsRow{}, err
	}
	counts, err := s.q.DefinitionStorageCounts(ctx, tx, workspaceID)
	return quotas, counts, err
}

// DefinitionWorkspace returns the owner of a live definition.
func (s *Store) DefinitionWorkspace(ctx context.Context, id domain.ID) (domain.ID, error) {
	ws, err := s.q.DefinitionWorkspace(ctx, s.pool, id)
	return ws, interpretError(err)
}

// DefinitionConcurrency returns the concurrency key version (the current
// one when 0) declares, read from its stored graph.
func (s *Store) DefinitionConcurrency(ctx context.Context, id domain.ID, version int) (*domain.Concurrency, error) {
	return s.definitionConcurrency(ctx, s.pool, id, version)
}

// definitionConcurrency is DefinitionConcurrency read through db (a
// transaction's, for a schedule's tick).
func (s *Store) definitionConcurrency(ctx context.Context, db dbsqlc.DBTX, id domain.ID, version int) (*domain.Concurrency, error) {
	p := dbsqlc.DefinitionConcurrencyParams{ID: id}
	if version > 0 {
		v := int32(version)
		p.Version = &v
	}
	raw, err := s.q.DefinitionConcurrency(ctx, db, p)
	if err != nil {
		return nil, interpretError(err)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c domain.Concurrency
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("stored concurrency of definition %s: %w", id, err)
	}
	return &c, nil
}

func (s *Store) withGraph(ctx context.Context, r dbsqlc.WorkflowDefinition) (domain.Definition, error) {
	v, err := s.q.DefinitionVersionGet(ctx, s.pool, dbsqlc.DefinitionVersionGetParams{WorkflowDefinitionID: r.ID, Version: r.CurrentVersion})
	if err != nil {
		return domain.Definition{}, interpretError(err)
	}
	g, err := graphFromJSON(v.Graph)
	if err != nil {
		return domain.Definition{}, err
	}
	return definitionFromRow(r, g), nil
}

// ListDefinitions pages through a workspace's live definitions.
func (s *Store) ListDefinitions(ctx context.Context, workspaceID domain.ID, page ports.Page) ([]domain.Definition, error) {
	rows, err := s.q.DefinitionList(ctx, s.pool, dbsqlc.DefinitionListParams{WorkspaceID: workspaceID, After: page.After, MaxRows: int32(page.Limit)})
	if err != nil {
		return nil, err
	}
	out := make([]domain.Definition, 0, len(rows))
	for _, r := range rows {
		g, err := graphFromJSON(r.Graph)
		if err != nil {
			return nil, err
		}
		out = append(out, definitionFromRow(r.WorkflowDefinition, g))
	}
	return out, nil
}

// DeleteDefinition soft-deletes a definition.
func (s *Store) DeleteDefinition(ctx context.Context, id domain.ID) error {
	n, err := s.q.DefinitionSoftDelete(ctx, s.pool, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return ports.ErrNotFound
	}
	return nil
}

// AddDefinitionVersion numbers and stores a new current version under the
// definition's row lock, within the workspace's versions quota.
func (s *Store) AddDefinitionVersion(ctx context.Context, id domain.ID, g domain.Graph) (domain.DefinitionVersion, error) {
	graph, err := graphJSON(g)
	if err != nil {
		return domain.DefinitionVersion{}, err
	}
	var out domain.DefinitionVersion
	txErr := s.withTx(ctx, func(tx pgx.Tx) error {
		ws, err := s.q.DefinitionWorkspace(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		quotas, counts, err := s.lockDefinitionStorage(ctx, tx, ws)
		if err != nil {
			return err
		}
		if err = quotas.CheckDefinitionVersions(int(counts.Versions)); err != nil {
			return err
		}
		v, err := s.q.DefinitionNextVersion(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		r, err := s.q.DefinitionVersionInsert(ctx, tx, dbsqlc.DefinitionVersionInsertParams{WorkflowDefinitionID: id, Version: v, Graph: graph})
		if err != nil {
			return err
		}
		if err := s.insertPins(ctx, tx, id, v, g); err != nil {
			return err
		}
		out = domain.DefinitionVersion{DefinitionID: id, Version: int(r.Version), Graph: g, CreatedAt: r.CreatedAt}
		return nil
	})
	return out, txErr
}

// GetDefinitionVersion loads one version.
func (s *Store) GetDefinitionVersion(ctx context.Context, id domain.ID, version int) (domain.DefinitionVersion, error) {
	if version < 1 || version > math.MaxInt32 {
		return domain.DefinitionVersion{}, ports.ErrNotFound
	}
	r, err := s.q.DefinitionVersionGet(ctx, s.pool, dbsqlc.DefinitionVersionGetParams{WorkflowDefinitionID: id, Version: int32(version)})
	if err != nil {
		return domain.DefinitionVersion{}, interpretError(err)
	}
	g, err := graphFromJSON(r.Graph)
	if err != nil {
		return domain.DefinitionVersion{}, err
	}
	return domain.DefinitionVersion{DefinitionID: r.WorkflowDefinitionID, Version: int(r.Version), Graph: g, CreatedAt: r.CreatedAt}, nil
}

// queueFromRow converts a stored row, refusing one whose state the domain
// does not allow, so that no rule is ever applied to a corrupt row.
func queueFromRow(r dbsqlc.WorkflowExecutionQueue) (domain.QueueItem, error) {
	status, err := domain.ParseQueueStatus(r.Status)
	if err != nil {
		return domain.QueueItem{}, fmt.Errorf("queue item %s: %w", r.ID, err)
	}
	rec := domain.QueueItem{
		ID: r.ID, WorkspaceID: r.WorkspaceID, DefinitionID: r.WorkflowDefinitionID, Input: r.Input,
		Priority: int(r.Priority), CreatedAt: r.CreatedAt, ExecutionID: r.ExecutionID,
		RetryOf:    r.RetryOf,
		ScheduleID: r.ScheduleID, ScheduleTick: r.ScheduleTick,
		QueueState: domain.QueueState{
			Status: status, ClaimedAt: r.ClaimedAt, DispatchedAt: r.DispatchedAt,
			AvailableAt: r.AvailableAt, AttemptCount: int(r.AttemptCount), DispatchFailures: int(r.DispatchFailures),
		},
	}
	if r.LastError != nil {
		rec.LastError = *r.LastError
	}
	if r.RunTimeoutMs != nil {
		rec.RunTimeout = time.Duration(*r.RunTimeoutMs) * time.Millisecond
	}
	if r.PinnedVersion != nil {
		rec.PinnedVersion = int(*r.PinnedVersion)
	}
	if r.ConcurrencyKey != nil && r.ConcurrencyLimit != nil {
		rec.ConcurrencyKey, rec.ConcurrencyLimit = *r.ConcurrencyKey, int(*r.ConcurrencyLimit)
		rec.ConcurrencyRate = startRateFromColumns(r.ConcurrencyRate, r.ConcurrencyRatePer, r.ConcurrencyBurst)
	}
	if err := rec.Validate(); err != nil {
		return domain.QueueItem{}, fmt.Errorf("queue item %s: %w", r.ID, err)
	}
	return rec, nil
}

// Enqueue writes the item, its audit row and its idempotency key in one
// transaction, then wakes the dispatchers once it has committed.
func (s *Store) Enqueue(ctx context.Context, e ports.ItemToEnqueue) (domain.QueueItem, bool, error) {
	var out domain.QueueItem
	replayed := false
	err := s.withCachedPlansTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, replayed, err = s.enqueueTx(ctx, tx, e, nil)
		return err
	})
	return out, replayed, err
}

// scheduleTick names the schedule tick an item is fired for.
type scheduleTick struct {
	scheduleID domain.ID
	tick       time.Time
}

// enqueuer names who enqueued an item in its audit row: the schedule for
// a fired item, the request's actor otherwise.
func enqueuer(a domain.Actor, fired *scheduleTick) string {
	if fired != nil {
		return "schedule:" + fired.scheduleID.String()
	}
	return a.String()
}

// enqueueTx is Enqueue within tx: the one enqueue path, which a schedule's
// firing takes too (with its tick), so that a fired item passes the same
// quotas under the same lock as an item enqueued by a request.
func (s *Store) enqueueTx(ctx context.Context, tx pgx.Tx, e ports.ItemToEnqueue, fired *scheduleTick) (domain.QueueItem, bool, error) {
	var out domain.QueueItem
	replayed := false
	err := func() error {
		if e.IdempotencyKey != "" {
			n, err := s.q.IdempotencyKeyClaim(ctx, tx, dbsqlc.IdempotencyKeyClaimParams{
				WorkspaceID: e.WorkspaceID, Key: e.IdempotencyKey, RequestHash: e.RequestHash, QueueID: e.ID,
				RetentionSeconds: IdempotencyRetention.Seconds(),
			})
			if err != nil {
				return interpretError(err)
			}
			if n == 0 {
				prior, err := s.q.IdempotencyKeyGet(ctx, tx, dbsqlc.IdempotencyKeyGetParams{
					WorkspaceID: e.WorkspaceID, Key: e.IdempotencyKey, RetentionSeconds: IdempotencyRetention.Seconds(),
				})
				if err != nil {
					return interpretError(err)
				}
				if !bytes.Equal(prior.RequestHash, e.RequestHash) {
					return fmt.Errorf("%w: Idempotency-Key was used with a different request", ports.ErrConflict)
				}
				r, err := s.queueGet(ctx, tx, prior.QueueID)
				if errors.Is(err, ports.ErrNotFound) {
					// The item completed and was deleted; its id still
					// answers the replay.
					out = domain.QueueItem{ID: prior.QueueID, WorkspaceID: e.WorkspaceID, DefinitionID: e.DefinitionID,
						QueueState: domain.QueueState{Status: domain.QueueDispatched}}
					replayed = true
					return nil
				}
				if err != nil {
					return err
				}
				out, replayed = r, true
				return nil
			}
		}
		// The item is inserted last: its trigger locks the workspace's row
		// of workspace_queue_stats until commit, and enqueues into the same
		// workspace wait for that lock, so it is held for the commit alone.
		detailMap := map[string]any{"workflowDefinitionId": e.DefinitionID, "priority": e.Priority, "idempotencyKey": e.IdempotencyKey}
		if e.NotBefore != nil {
			detailMap["notBefore"] = e.NotBefore
		}
		if fired != nil {
			detailMap["scheduleId"], detailMap["scheduleTick"] = fired.scheduleID, fired.tick
		}
		details, _ := json.Marshal(detailMap)
		ws, subject := e.WorkspaceID, e.ID
		if err := s.q.ActivityInsert(ctx, tx, dbsqlc.ActivityInsertParams{
			ID: domain.ID(uuid.New()), WorkspaceID: &ws, Actor: enqueuer(e.Actor, fired), Action: "execution.enqueued", SubjectID: &subject, Details: details,
		}); err != nil {
			return err
		}
		wakeAfterCommit(tx, QueueChannel)
		stats, err := s.enqueueCounts(ctx, tx, e.WorkspaceID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if stats.Plan != nil {
			var quotas domain.PlanQuotas
			if quotas, err = s.workspaceQuotas(ctx, tx, e.WorkspaceID); err != nil {
				return err
			}
			if err = quotas.CheckEnqueue(int(stats.Pending), int(stats.Stored), int(stats.Executions), 1); err != nil {
				return err
			}
		}
		p := dbsqlc.QueueInsertParams{
			ID: e.ID, WorkspaceID: e.WorkspaceID, WorkflowDefinitionID: e.DefinitionID, Input: e.Input, Priority: int16(e.Priority),
			TraceContext: traceParent(ctx), ConcurrencyKey: e.ConcurrencyKey, NotBefore: e.NotBefore, RetryOf: e.RetryOf,
			RunTimeoutMs: runTimeoutMs(e.RunTimeout),
		}
		if e.PinnedVersion > 0 {
			v := int32(e.PinnedVersion)
			p.PinnedVersion = &v
		}
		if e.ConcurrencyKey != nil {
			n := int32(e.ConcurrencyLimit)
			p.ConcurrencyLimit = &n
			p.ConcurrencyRate, p.ConcurrencyRatePer, p.ConcurrencyBurst = startRateToColumns(e.ConcurrencyRate)
		}
		if fired != nil {
			p.ScheduleID, p.ScheduleTick = &fired.scheduleID, &fired.tick
		}
		r, err := s.q.QueueInsert(ctx, tx, p)
		if err != nil {
			return interpretError(err)
		}
		out, err = queueFromRow(r)
		return err
	}()
	return out, replayed, err
}

// runTimeoutMs is an enqueue's run deadline as stored: milliseconds, or
// NULL for none.
func runTimeoutMs(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := max(1, d.Milliseconds())
	return &ms
}

// GetQueueItem loads a queue item.
func (s *Store) GetQueueItem(ctx context.Context, id domain.ID) (domain.QueueItem, error) {
	return s.queueGet(ctx, s.pool, id)
}

func (s *Store) queueGet(ctx context.Context, db dbsqlc.DBTX, id domain.ID) (domain.QueueItem, error) {
	r, err := s.q.QueueGet(ctx, db, id)
	if err != nil {
		return domain.QueueItem{}, interpretError(err)
	}
	return queueFromRow(r)
}

// ListQueue pages through a workspace's queue items in the claim's order.
func (s *Store) ListQueue(ctx context.Context, workspaceID domain.ID, status *domain.QueueStatus, limit int, after *ports.QueueCursor) ([]domain.QueueItem, error) {
	p := dbsqlc.QueueListParams{WorkspaceID: workspaceID, MaxRows: int32(limit)}
	if status != nil {
		v := string(*status)
		p.Status = &v
	}
	if after != nil {
		priority := int16(after.Priority)
		p.AfterPriority, p.AfterCreatedAt, p.AfterID = &priority, &after.CreatedAt, &after.ID
	}
	rows, err := s.q.QueueList(ctx, s.pool, p)
	if err != nil {
		return nil, err
	}
	out := make([]domain.QueueItem, len(rows))
	for i, r := range rows {
		// The list reads no input; the item carries none.
		if out[i], err = queueFromRow(dbsqlc.WorkflowExecutionQueue{
			ID: r.ID, WorkspaceID: r.WorkspaceID, WorkflowDefinitionID: r.WorkflowDefinitionID, Status: r.Status,
			Priority: r.Priority, CreatedAt: r.CreatedAt, AvailableAt: r.AvailableAt, ClaimedAt: r.ClaimedAt,
			DispatchedAt: r.DispatchedAt, AttemptCount: r.AttemptCount, DispatchFailures: r.DispatchFailures,
			LastError: r.LastError, ExecutionID: r.ExecutionID, ConcurrencyKey: r.ConcurrencyKey, ConcurrencyLimit: r.ConcurrencyLimit,
			ScheduleID: r.ScheduleID, ScheduleTick: r.ScheduleTick,
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WaitFigures reads a workspace's limit, RUNNING count and the RUNNING
// count of each key, in one statement.
func (s *Store) WaitFigures(ctx context.Context, workspaceID domain.ID, keys []string) (domain.WaitFigures, error) {
	r, err := s.q.QueueWaitFigures(ctx, s.pool, dbsqlc.QueueWaitFiguresParams{WorkspaceID: workspaceID, Keys: keys})
	if err != nil {
		return domain.WaitFigures{}, err
	}
	f := domain.WaitFigures{WorkspaceLimit: int(r.MaxRunning), WorkspaceRunning: int(r.Running), WorkspaceFloor: int(r.Floor), KeyRunning: make(map[string]int, len(keys))}
	for i, k := range keys {
		if i < len(r.KeyRunning) {
			f.KeyRunning[k] = int(r.KeyRunning[i])
		}
	}
	// The pool as a claim would read it, the workspace's own floor not
	// among the slots held for others.
	capacity, err := s.q.PoolCapacity(ctx, s.pool)
	if err != nil {
		return domain.WaitFigures{}, err
	}
	if capacity != nil {
		f.Pool = domain.PoolFigures{Bounded: true, Capacity: int(*capacity)}
		if err = s.readPoolFigures(ctx, s.pool, &f.Pool, []domain.ID{workspaceID}); err != nil {
			return domain.WaitFigures{}, err
		}
	}
	return f, s.waitRates(ctx, workspaceID, keys, &f)
}

func queueFromRows(rows []dbsqlc.WorkflowExecutionQueue) ([]domain.QueueItem, error) {
	out := make([]domain.QueueItem, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = queueFromRow(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdateQueueItem applies update to the item under its row lock and writes
// the result with the one guarded write every per-item transition takes.
func (s *Store) UpdateQueueItem(ctx context.Context, id domain.ID, update func(*domain.QueueItem) error) (domain.QueueItem, error) {
	var out domain.QueueItem
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		r, err := s.q.QueueGetForUpdate(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		from, err := queueFromRow(r)
		if err != nil {
			return err
		}
		next := from
		if err := update(&next); err != nil {
			return err
		}
		if err := s.writeState(ctx, tx, from, next.QueueState, auditAPI); err != nil {
			return err
		}
		out = next
		return nil
	})
	return out, err
}

// writeState writes to, computed by the domain from the locked item from,
// guarded by from's state; a row that is not in it is an error, since the
// lock should have kept it there.
func (s *Store) writeState(ctx context.Context, tx pgx.Tx, from domain.QueueItem, to domain.QueueState, actor string) error {
	written, err := s.applyTransitions(ctx, tx, []ports.QueueTransition{{ID: from.ID, FromStatus: from.Status, FromClaimedAt: from.ClaimedAt, To: to}}, actor)
	if err != nil {
		return err
	}
	if len(written) != 1 {
		return fmt.Errorf("queue item %s moved on under its row lock", from.ID)
	}
	return nil
}

func executionFromRow(r dbsqlc.WorkflowExecution) domain.Execution {
	return domain.Execution{
		ID: r.ID, QueueID: r.QueueID, WorkspaceID: r.WorkspaceID, DefinitionID: r.WorkflowDefinitionID, Version: int(r.WorkflowVersion),
		Status: domain.ExecutionStatus(r.Status), Input: r.Input, AdmittedAt: r.StartedAt, CompletedAt: r.CompletedAt,
		DurationMs: r.DurationMs, Error: r.Error, RetryOf: r.RetryOf,
	}
}

// SetRetryOf names the execution id retries; ports.ErrNotFound when
// either is gone.
func (s *Store) SetRetryOf(ctx context.Context, id, retryOf domain.ID) error {
	n, err := s.q.ExecutionSetRetryOf(ctx, s.pool, dbsqlc.ExecutionSetRetryOfParams{ID: id, RetryOf: &retryOf})
	if err != nil {
		return err
	}
	if n == 0 {
		return ports.ErrNotFound
	}
	return nil
}

func nodesFromRows(rows []dbsqlc.WorkflowExecutionNode) []domain.NodeRecord {
	nodes := make([]domain.NodeRecord, len(rows))
	for i, n := range rows {
		nodes[i] = domain.NodeRecord{
			Key: n.NodeKey, Type: domain.NodeType(n.NodeType), Status: domain.NodeStatus(n.Status), Attempt: int(n.Attempt),
			Input: n.Input, Output: n.Output, Error: n.Error, StartedAt: n.StartedAt, CompletedAt: n.CompletedAt,
		}
		if n.ChildWorkflowID != nil {
			nodes[i].ChildWorkflowID = *n.ChildWorkflowID
		}
		if n.ChildRunID != nil {
			nodes[i].ChildRunID = *n.ChildRunID
		}
	}
	return nodes
}

// ExecutionWorkspace names the workspace an execution belongs to.
func (s *Store) ExecutionWorkspace(ctx context.Context, id domain.ID) (domain.ID, error) {
	ws, err := s.q.ExecutionWorkspace(ctx, s.pool, id)
	return ws, interpretError(err)
}

// GetExecutionWithoutNodes loads an execution's own row.
func (s *Store) GetExecutionWithoutNodes(ctx context.Context, id domain.ID) (domain.Execution, error) {
	r, err := s.q.ExecutionGet(ctx, s.pool, id)
	if err != nil {
		return domain.Execution{}, interpretError(err)
	}
	return executionFromRow(r), nil
}

// ListNodes pages through an execution's node records in key order.
func (s *Store) ListNodes(ctx context.Context, executionID domain.ID, limit int, afterKey string) ([]domain.NodeRecord, error) {
	rows, err := s.q.NodesPage(ctx, s.pool, dbsqlc.NodesPageParams{ExecutionID: executionID, AfterKey: afterKey, MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	return nodesFromRows(rows), nil
}

// ListExecutions pages through a workspace's executions, newest first.
func (s *Store) ListExecutions(ctx context.Context, workspaceID domain.ID, filter ports.ExecutionFilter, limit int, before *ports.ExecutionCursor) ([]domain.Execution, error) {
	p := dbsqlc.ExecutionListParams{WorkspaceID: workspaceID, MaxRows: int32(limit),
		WorkflowDefinitionID: filter.DefinitionID, QueueID: filter.QueueID}
	if filter.WaitingForEvent {
		p.WaitingForEvent = pgtype.Bool{Bool: true, Valid: true}
	}
	if filter.Status != nil {
		v := string(*filter.Status)
		p.Status = &v
	}
	if before != nil {
		p.BeforeStartedAt, p.BeforeID = &before.AdmittedAt, &before.ID
	}
	rows, err := s.q.ExecutionList(ctx, s.pool, p)
	if err != nil {
		return nil, err
	}
	out := make([]domain.Execution, len(rows))
	for i, r := range rows {
		// The list reads no input; the execution carries none.
		out[i] = executionFromRow(dbsqlc.WorkflowExecution{
			ID: r.ID, QueueID: r.QueueID, WorkspaceID: r.WorkspaceID, WorkflowDefinitionID: r.WorkflowDefinitionID,
			WorkflowVersion: r.WorkflowVersion, Status: r.Status, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt,
			DurationMs: r.DurationMs, Error: r.Error,
		})
	}
	return out, nil
}
