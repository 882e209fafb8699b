package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Claim runs one admission transaction; see ports.DispatchStore. Its
// statements are set-based, so a batch costs the same few round trips
// whatever its size, and the commit is the only durable write before the
// Temporal calls. When writing the batch's executions fails on a row, the
// transaction is run again writing each execution under its own
// savepoint, so that the rows at fault fail their items alone and the rest
// of the batch is claimed; the happy path pays nothing for this.
func (s *Store) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	res, err := s.claim(ctx, fence, budget, plan, reject, false)
	var rowErr *rowError
	if errors.As(err, &rowErr) {
		s.log.Warn("a claimed item's execution could not be written; claiming again item by item", "error", rowErr.err)
		res, err = s.claim(ctx, fence, budget, plan, reject, true)
	}
	return res, err
}

// rowError is a statement error caused by a row's data rather than by the
// connection, which per-item writes can isolate.
type rowError struct{ err error }

func (e *rowError) Error() string { return e.err.Error() }

func (e *rowError) Unwrap() error { return e.err }

func asRowError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) {
		// Class 22 is data exception, class 23 integrity constraint violation.
		return &rowError{err: err}
	}
	return err
}

func (s *Store) claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc, itemByItem bool) (ports.ClaimResult, error) {
	var res ports.ClaimResult
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		res = ports.ClaimResult{Refused: map[domain.Plan]int{}, PassedOver: map[domain.WaitReason]int{}}
		// The fence, the limits' read lock and the workspaces with
		// pending work, in one round trip. The limits every later
		// statement reads are the ones in force until commit: an edit
		// waits for this lock (see AdmissionLimitsReadLock).
		var claimer ports.Fence
		var pending []dbsqlc.QueueClaimableWorkspacesRow
		var calls []func(db dbsqlc.DBTX) error
		if fence.Fenced() {
			calls = append(calls, s.checkFence(ctx, fence, &claimer))
		}
		calls = append(calls, func(db dbsqlc.DBTX) error {
			if err := s.q.AdmissionLimitsReadLock(ctx, db); err != nil {
				return fmt.Errorf("locking the limits: %w", err)
			}
			return nil
		})
		if err := pipeline(ctx, tx, append(calls, s.readPending(ctx, &res, &pending)...)...); err != nil {
			return err
		}
		present, capacity, err := s.claimableWorkspaces(ctx, tx, pending, &res)
		if err != nil || len(present) == 0 {
			return err
		}
		pool, snap, err := s.lockWorkspaces(ctx, tx, capacity, present)
		if err != nil {
			return err
		}
		if err = s.readPool(ctx, tx, &pool, snap.ids); err != nil {
			return err
		}
		p, err := plan(snap.rates.now, pool, snap.workspaces, budget, func(n map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
			return s.readWindows(ctx, tx, snap.workspaces, n, snap.rates)
		})
		if err != nil {
			return err
		}
		res.More, res.AtCapacity = p.More, p.AtCapacity
		for k, n := range p.Refused {
			res.Refused[k] += n
		}
		for k, n := range p.PassedOver {
			res.PassedOver[k] += n
		}
		if len(p.Chosen) > 0 {
			if err = s.claimChosen(ctx, tx, claimer, snap, p, reject, itemByItem, &res); err != nil {
				return err
			}
		}
		return s.finishClaim(ctx, tx, snap, p, &res)
	})
	if err != nil {
		return ports.ClaimResult{}, err
	}
	return res, nil
}

// claimableWorkspaces takes the claim's prefilter as read (readPending),
// fails the items of the workspaces that are gone, and returns those to
// lock: with room by their counts and an item due now; and the pool's capacity as read with them
// (0: none). A workspace with room whose items are all due later is
// passed over and gives res its NextDue.
func (s *Store) claimableWorkspaces(ctx context.Context, tx pgx.Tx, pending []dbsqlc.QueueClaimableWorkspacesRow, res *ports.ClaimResult) ([]domain.ID, int, error) {
	if len(pending) == 0 {
		return nil, 0, nil
	}
	capacity := int(pending[0].PoolCapacity)
	var gone, present []domain.ID
	for _, p := range pending {
		switch {
		case p.Plan == "":
			gone = append(gone, p.WorkspaceID)
		case p.DueInSeconds > 0:
			// Nothing of it is due: it is not locked, and only says
			// when to claim again.
			res.PassedOver[domain.WaitNotBefore]++
			res.NextDue = sooner(res.NextDue, seconds(p.DueInSeconds))
		default:
			present = append(present, p.WorkspaceID)
		}
	}
	res.Workspaces = len(gone) + len(present)
	if len(gone) == 0 {
		return present, capacity, nil
	}
	reason := "workspace not found: it was deleted after the item was enqueued"
	n, err := s.q.QueueFailPendingOfWorkspaces(ctx, tx, dbsqlc.QueueFailPendingOfWorkspacesParams{
		WorkspaceIds: gone, LastError: &reason,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("failing items of deleted workspaces: %w", err)
	}
	res.Failed += int(n)
	for _, ws := range gone {
		s.log.Warn("workspace not found; failing its pending queue items", "workspace_id", ws)
	}
	if err = s.q.QueueStatsForgetGone(ctx, tx, gone); err != nil {
		return nil, 0, fmt.Errorf("forgetting deleted workspaces' counts: %w", err)
	}
	return present, capacity, nil
}

// readPool reads, under the pool's lock, what runs in a pool with a
// capacity and the slots held for the workspaces below their floor other
// than the locked ones.
func (s *Store) readPool(ctx context.Context, tx pgx.Tx, pool *domain.PoolFigures, locked []domain.ID) error {
	if !pool.Bounded {
		return nil
	}
	return s.readPoolFigures(ctx, tx, pool, locked)
}

// readPoolFigures reads what runs in the pool and the slots held for the
// workspaces below their floor other than those given.
func (s *Store) readPoolFigures(ctx context.Context, db dbsqlc.DBTX, pool *domain.PoolFigures, locked []domain.ID) error {
	r, err := s.q.PoolAdmissionFigures(ctx, db, locked)
	if err != nil {
		return fmt.Errorf("counting the pool: %w", err)
	}
	pool.Running, pool.Reserved = int(r.Running), int(r.FloorsWaiting)
	return nil
}

// readPending is the calls of a pipeline that read, into pending, the
// workspaces with pending work the claim may lock: the room prefilter's
// (QueueClaimableWorkspaces), counting in res the full ones it skips; or,
// WithoutRoomPrefilter, every one, none of them skipped.
func (s *Store) readPending(ctx context.Context, res *ports.ClaimResult, pending *[]dbsqlc.QueueClaimableWorkspacesRow) []func(db dbsqlc.DBTX) error {
	if s.unfiltered {
		return []func(db dbsqlc.DBTX) error{func(db dbsqlc.DBTX) error {
			rows, err := s.q.QueueClaimableWorkspacesUnfiltered(ctx, db)
			if err != nil {
				return fmt.Errorf("claimable workspaces: %w", err)
			}
			*pending = make([]dbsqlc.QueueClaimableWorkspacesRow, len(rows))
			for i, r := range rows {
				(*pending)[i] = dbsqlc.QueueClaimableWorkspacesRow{WorkspaceID: r.WorkspaceID, Plan: r.Plan, PoolCapacity: r.PoolCapacity}
			}
			return nil
		}}
	}
	return []func(db dbsqlc.DBTX) error{func(db dbsqlc.DBTX) error {
		rows, err := s.q.QueueClaimableWorkspaces(ctx, db)
		if err != nil {
			return fmt.Errorf("claimable workspaces: %w", err)
		}
		*pending = rows
		return nil
	}, func(db dbsqlc.DBTX) error {
		full, err := s.q.QueueStatsFullByPlan(ctx, db)
		if err != nil {
			return fmt.Errorf("counting full workspaces: %w", err)
		}
		for _, f := range full {
			res.Refused[domain.Plan(f.Plan)] += int(f.FullWorkspaces)
			res.PassedOver[domain.WaitWorkspaceLimit] += int(f.FullWorkspaces)
		}
		return nil
	}}
}

// claimSnapshot is what a claim read of the workspaces it locked: their
// limits, RUNNING counts and start rates, under their locks.
type claimSnapshot struct {
	ids        []domain.ID
	workspaces []ports.ClaimableWorkspace
	plans      map[domain.ID]domain.Plan
	rates      *claimRates
}

// lockWorkspaces locks, in one round trip: the pool's row, when the pool
// has a capacity (capacity, as the claim read it after the limits' read
// lock; 0 for none), until the claim commits (PoolLockForAdmission),
// before any workspace, so that the claims that can create RUNNING
// executions in a bounded pool run one after another and the pool's count
// read under the lock is exact; then the workspaces to admit from,
// skipping those another claim holds; and reads their snapshot under the
// locks. The RUNNING counts and start rates are read for every workspace
// in present, each statement after the locks', and kept for the locked.
func (s *Store) lockWorkspaces(ctx context.Context, tx pgx.Tx, capacity int, present []domain.ID) (domain.PoolFigures, claimSnapshot, error) {
	var pool domain.PoolFigures
	var calls []func(db dbsqlc.DBTX) error
	if capacity > 0 {
		pool = domain.PoolFigures{Bounded: true, Capacity: capacity}
		calls = append(calls, func(db dbsqlc.DBTX) error {
			if err := s.q.PoolLockForAdmission(ctx, db); err != nil {
				return fmt.Errorf("locking the pool: %w", err)
			}
			return nil
		})
	}
	var locked []dbsqlc.WorkspacesLockForAdmissionRow
	var running []dbsqlc.ExecutionsRunningForWorkspacesRow
	var rates *claimRates
	calls = append(calls, func(db dbsqlc.DBTX) (err error) {
		if locked, err = s.q.WorkspacesLockForAdmission(ctx, db, present); err != nil {
			return fmt.Errorf("locking workspaces: %w", err)
		}
		return nil
	}, func(db dbsqlc.DBTX) (err error) {
		if running, err = s.q.ExecutionsRunningForWorkspaces(ctx, db, present); err != nil {
			return fmt.Errorf("counting running executions: %w", err)
		}
		return nil
	}, func(db dbsqlc.DBTX) (err error) {
		rates, err = s.readStartRates(ctx, db, present)
		return err
	})
	if err := pipeline(ctx, tx, calls...); err != nil {
		return domain.PoolFigures{}, claimSnapshot{}, err
	}
	snap := claimSnapshot{
		ids: make([]domain.ID, len(locked)), workspaces: make([]ports.ClaimableWorkspace, len(locked)),
		plans: make(map[domain.ID]domain.Plan, len(locked)), rates: rates,
	}
	index := make(map[domain.ID]int, len(locked))
	for i, w := range locked {
		snap.ids[i], index[w.ID], snap.plans[w.ID] = w.ID, i, domain.Plan(w.Plan)
		snap.workspaces[i] = ports.ClaimableWorkspace{ID: w.ID, Plan: domain.Plan(w.Plan), Limit: int(w.MaxRunning), Floor: int(w.Floor), Weight: int(w.Weight)}
	}
	for _, r := range running {
		if i, ok := index[r.WorkspaceID]; ok {
			snap.workspaces[i].Running++
		}
	}
	rates.keepWorkspaces(index)
	for i := range snap.workspaces {
		snap.workspaces[i].Rate = snap.rates.bucket(bucketID{workspace: snap.ids[i]})
	}
	return pool, snap, nil
}

// finishClaim runs on every way out once the claim is planned: it writes
// the start-rate buckets the plan says the claimed items took from and
// says when the claim should run again.
func (s *Store) finishClaim(ctx context.Context, tx pgx.Tx, snap claimSnapshot, p ports.ClaimPlan, res *ports.ClaimResult) error {
	if p.Started != nil {
		taken := p.Started(res.Claimed)
		if err := snap.rates.write(ctx, s.q, tx, taken); err != nil {
			return err
		}
		res.NextDue = sooner(res.NextDue, taken.NextDue)
	}
	due, err := s.q.ClaimNextDue(ctx, tx, snap.ids)
	if err != nil {
		return fmt.Errorf("reading the next due time: %w", err)
	}
	if due > 0 {
		res.NextDue = sooner(res.NextDue, seconds(due))
	}
	return nil
}

// claimChosen locks the chosen items that are still PENDING, fails those
// that cannot run (the plan's Version says their definition or version
// is gone; item by item, their execution is refused), writes the others'
// executions as RUNNING and marks them CLAIMED by claimer, adding them to
// res.
func (s *Store) claimChosen(ctx context.Context, tx pgx.Tx, claimer ports.Fence, snap claimSnapshot, p ports.ClaimPlan,
	reject ports.RejectFunc, itemByItem bool, res *ports.ClaimResult,
) error {
	candidates, err := s.lockCandidates(ctx, tx, p.Chosen)
	if err != nil {
		return err
	}
	var failed []ports.QueueTransition
	var batch claimBatch
	for _, c := range candidates {
		version, reason := p.Version(c.item, c.current, c.found)
		if reason != "" {
			s.log.Warn("definition not found; failing the queue item", "queue_item_id", c.item.ID,
				"workspace_id", c.item.WorkspaceID, "workflow_definition_id", c.item.DefinitionID, "version", version)
			t, rejectErr := rejected(c.item, reason, reject)
			if rejectErr != nil {
				return rejectErr
			}
			failed = append(failed, t)
			continue
		}
		res.Claimed = append(res.Claimed, batch.add(c, version, snap.plans[c.item.WorkspaceID]))
	}
	if itemByItem {
		var refused []ports.QueueTransition
		batch.up, batch.claim, res.Claimed, refused, err = s.upsertEachRunning(ctx, tx, batch.up, batch.claim, res.Claimed, reject)
		if err != nil {
			return err
		}
		failed = append(failed, refused...)
	}
	if len(failed) > 0 {
		if _, err = s.applyTransitions(ctx, tx, failed, auditDispatcher); err != nil {
			return fmt.Errorf("failing items that cannot run: %w", err)
		}
		res.Failed += len(failed)
	}
	if len(batch.claim.Ids) == 0 {
		return nil
	}
	// The graphs, the executions and the marking, in one round trip.
	calls := []func(db dbsqlc.DBTX) error{s.attachGraphs(ctx, res.Claimed)}
	if !itemByItem {
		calls = append(calls, func(db dbsqlc.DBTX) error {
			if err := s.q.ExecutionsUpsertRunning(ctx, db, batch.up); err != nil {
				return fmt.Errorf("creating executions: %w", asRowError(err))
			}
			return nil
		})
	}
	return pipeline(ctx, tx, append(calls, s.markClaimed(ctx, claimer, batch.claim, res.Claimed))...)
}

// claimCandidate is a chosen item as the claim locked it, with what says
// which definition version it can run: the definition's current version
// (0 when it is gone) and found, whether a version of it is stored.
type claimCandidate struct {
	item        domain.QueueItem
	current     int
	found       func(version int) bool
	traceParent string
}

// lockCandidates locks the chosen items still PENDING (QueueClaimCandidates)
// and reads, for the retries among them, whether their pinned versions
// still exist.
func (s *Store) lockCandidates(ctx context.Context, tx pgx.Tx, chosen []domain.ID) ([]claimCandidate, error) {
	rows, err := s.q.QueueClaimCandidates(ctx, tx, chosen)
	if err != nil {
		return nil, fmt.Errorf("claiming items: %w", err)
	}
	pinnedFound, err := s.pinnedVersionsFound(ctx, tx, rows)
	if err != nil {
		return nil, err
	}
	out := make([]claimCandidate, len(rows))
	for i, r := range rows {
		item, err := queueFromRow(r.WorkflowExecutionQueue)
		if err != nil {
			return nil, err
		}
		current, currentFound := int(r.CurrentVersion), r.VersionFound
		out[i] = claimCandidate{item: item, current: current, found: func(v int) bool {
			return (v == current && currentFound) || pinnedFound[versionOf{item.DefinitionID, int32(v)}]
		}}
		if r.WorkflowExecutionQueue.TraceContext != nil {
			out[i].traceParent = *r.WorkflowExecutionQueue.TraceContext
		}
	}
	return out, nil
}

// claimBatch is what a claim writes of the items it claims: their
// executions as RUNNING, and the items as CLAIMED under them.
type claimBatch struct {
	up    dbsqlc.ExecutionsUpsertRunningParams
	claim dbsqlc.QueueMarkClaimedParams
}

// add adds c's item, to run version, and returns it as claimed. Every
// claim runs under an execution id of its own: a release takes the last
// claim's off the item, so that a start of it landing late is refused
// admission instead of running the item beside this claim.
func (b *claimBatch) add(c claimCandidate, version int, plan domain.Plan) ports.ClaimedItem {
	rec := c.item
	execID := domain.ID(uuid.New())
	b.up.Ids = append(b.up.Ids, execID)
	b.up.QueueIds = append(b.up.QueueIds, rec.ID)
	b.up.WorkspaceIds = append(b.up.WorkspaceIds, rec.WorkspaceID)
	b.up.WorkflowDefinitionIds = append(b.up.WorkflowDefinitionIds, rec.DefinitionID)
	b.up.WorkflowVersions = append(b.up.WorkflowVersions, int32(version))
	b.up.Inputs = append(b.up.Inputs, rec.Input)
	b.claim.Ids = append(b.claim.Ids, rec.ID)
	b.claim.ExecutionIds = append(b.claim.ExecutionIds, execID)
	rec.ExecutionID = &execID
	return ports.ClaimedItem{QueueItem: rec, ExecutionID: execID, Version: version, Plan: plan, TraceParent: c.traceParent}
}

// markClaimed is the call that marks the batch's items CLAIMED by claimer
// (with its lease and term when fenced) and hands them out in the state
// the statement wrote, checked as any loaded state is.
func (s *Store) markClaimed(ctx context.Context, claimer ports.Fence, claim dbsqlc.QueueMarkClaimedParams, items []ports.ClaimedItem) func(db dbsqlc.DBTX) error {
	if claimer.Fenced() {
		claim.ClaimLease, claim.ClaimedBy, claim.ClaimTerm = &claimer.Lease, &claimer.Holder, &claimer.Term
	}
	return func(db dbsqlc.DBTX) error {
		stamped, err := s.q.QueueMarkClaimed(ctx, db, claim)
		if err != nil {
			return fmt.Errorf("marking claimed: %w", err)
		}
		claimed := make(map[domain.ID]domain.QueueState, len(stamped))
		for _, r := range stamped {
			status, err := domain.ParseQueueStatus(r.Status)
			if err != nil {
				return fmt.Errorf("queue item %s: %w", r.ID, err)
			}
			claimed[r.ID] = domain.QueueState{Status: status, ClaimedAt: r.ClaimedAt}
		}
		for i := range items {
			item := &items[i]
			st, ok := claimed[item.ID]
			if !ok {
				return fmt.Errorf("queue item %s was not claimed although it was locked", item.ID)
			}
			item.Status, item.ClaimedAt, item.Claimer = st.Status, st.ClaimedAt, claimer
			if err := item.Validate(); err != nil {
				return fmt.Errorf("queue item %s: %w", item.ID, err)
			}
		}
		return nil
	}
}

// claimWindow is how many admissible items are read per slot a workspace
// is given, so that keys can take turns and a key with fewer free slots
// than items leaves its place to the next key in the same batch.
const claimWindow = 4

// seconds is a due time read from the database as seconds, at least a
// microsecond so that it reads as due.
func seconds(s float64) time.Duration {
	return max(time.Duration(s*float64(time.Second)), time.Microsecond)
}

// sooner is the sooner of two due times, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// readWindows reads, in one statement, a window of admissible items of
// each workspace given a count in n (claimWindow items per count), in
// claim order, with each item's key's figures.
func (s *Store) readWindows(ctx context.Context, tx pgx.Tx, workspaces []ports.ClaimableWorkspace, n map[domain.ID]int, rates *claimRates) (map[domain.ID][]domain.KeyedCandidate, error) {
	var p dbsqlc.QueueAdmissibleWindowParams
	for _, w := range workspaces {
		if k := n[w.ID]; k > 0 {
			p.WorkspaceIds, p.Windows = append(p.WorkspaceIds, w.ID), append(p.Windows, int32(k*claimWindow))
		}
	}
	if len(p.WorkspaceIds) == 0 {
		return nil, nil
	}
	rows, err := s.q.QueueAdmissibleWindow(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("reading admissible items: %w", err)
	}
	if err = rates.readKeys(ctx, s.q, tx, rows); err != nil {
		return nil, err
	}
	out := map[domain.ID][]domain.KeyedCandidate{}
	for _, r := range rows {
		c := domain.KeyedCandidate{ID: r.ID, Key: r.ConcurrencyKey, Limit: int(r.ConcurrencyLimit), Running: int(r.KeyRunning)}
		if r.ConcurrencyKey != "" {
			c.Rate = rates.bucket(bucketID{workspace: r.WorkspaceID, key: r.ConcurrencyKey})
		}
		out[r.WorkspaceID] = append(out[r.WorkspaceID], c)
	}
	return out, nil
}

// checkFence is the call that checks, inside a transaction, that fence's
// lease is still this holder's (and in fence's term, when it names one),
// share-locking the lease row until the transaction ends so that nobody
// takes it over meanwhile. It sets claimer to the fence with the lease's
// current term, and returns ports.ErrLeaseLost when the lease or the term
// is gone. fence must be Fenced.
func (s *Store) checkFence(ctx context.Context, fence ports.Fence, claimer *ports.Fence) func(db dbsqlc.DBTX) error {
	return func(db dbsqlc.DBTX) error {
		p := dbsqlc.LeaseFenceParams{Name: fence.Lease, LockedBy: fence.Holder}
		if !fence.Term.IsZero() {
			p.Term = &fence.Term
		}
		term, err := s.q.LeaseFence(ctx, db, p)
		if errors.Is(err, pgx.ErrNoRows) {
			return ports.ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("checking the lease: %w", err)
		}
		*claimer = fence
		claimer.Term = term
		return nil
	}
}

// versionOf names one version of a definition.
type versionOf struct {
	id domain.ID
	n  int32
}

// pinnedVersionsFound looks up, in one statement and only when some of the
// candidates are retries, which of their pinned versions still exist,
// locking those until the claim commits (DefinitionVersionsFound).
func (s *Store) pinnedVersionsFound(ctx context.Context, tx pgx.Tx, candidates []dbsqlc.QueueClaimCandidatesRow) (map[versionOf]bool, error) {
	p := dbsqlc.DefinitionVersionsFoundParams{}
	for _, c := range candidates {
		if v := c.WorkflowExecutionQueue.PinnedVersion; v != nil {
			p.WorkflowDefinitionIds, p.Versions = append(p.WorkflowDefinitionIds, c.WorkflowExecutionQueue.WorkflowDefinitionID), append(p.Versions, *v)
		}
	}
	if len(p.Versions) == 0 {
		return nil, nil
	}
	rows, err := s.q.DefinitionVersionsFound(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("looking up pinned versions: %w", err)
	}
	found := make(map[versionOf]bool, len(rows))
	for _, r := range rows {
		found[versionOf{r.WorkflowDefinitionID, r.Version}] = true
	}
	return found, nil
}

// attachGraphs is the call that reads the claimed items' graphs in one
// statement, each distinct definition version once, and attaches them.
func (s *Store) attachGraphs(ctx context.Context, claimed []ports.ClaimedItem) func(db dbsqlc.DBTX) error {
	seen := map[versionOf]bool{}
	p := dbsqlc.DefinitionVersionGraphsParams{}
	for _, c := range claimed {
		v := versionOf{c.DefinitionID, int32(c.Version)}
		if !seen[v] {
			seen[v] = true
			p.WorkflowDefinitionIds, p.Versions = append(p.WorkflowDefinitionIds, v.id), append(p.Versions, v.n)
		}
	}
	return func(db dbsqlc.DBTX) error {
		rows, err := s.q.DefinitionVersionGraphs(ctx, db, p)
		if err != nil {
			return fmt.Errorf("reading graphs: %w", err)
		}
		graphs := make(map[versionOf]json.RawMessage, len(rows))
		for _, r := range rows {
			graphs[versionOf{r.WorkflowDefinitionID, r.Version}] = r.Graph
		}
		for i := range claimed {
			claimed[i].Graph = graphs[versionOf{claimed[i].DefinitionID, int32(claimed[i].Version)}]
		}
		return nil
	}
}

// upsertEachRunning writes the claimed items' executions one by one, each
// under its own savepoint. An item whose row is refused leaves the batch
// and is handed to reject with the database's reason; the others are
// returned, written.
func (s *Store) upsertEachRunning(ctx context.Context, tx pgx.Tx, up dbsqlc.ExecutionsUpsertRunningParams,
	claim dbsqlc.QueueMarkClaimedParams, items []ports.ClaimedItem, reject ports.RejectFunc,
) (dbsqlc.ExecutionsUpsertRunningParams, dbsqlc.QueueMarkClaimedParams, []ports.ClaimedItem, []ports.QueueTransition, error) {
	var keptUp dbsqlc.ExecutionsUpsertRunningParams
	var keptClaim dbsqlc.QueueMarkClaimedParams
	var kept []ports.ClaimedItem
	var failed []ports.QueueTransition
	for i, item := range items {
		one := dbsqlc.ExecutionsUpsertRunningParams{
			Ids: up.Ids[i : i+1], QueueIds: up.QueueIds[i : i+1], WorkspaceIds: up.WorkspaceIds[i : i+1], WorkflowDefinitionIds: up.WorkflowDefinitionIds[i : i+1],
			WorkflowVersions: up.WorkflowVersions[i : i+1], Inputs: up.Inputs[i : i+1],
		}
		err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return s.q.ExecutionsUpsertRunning(ctx, sp, one) })
		if err == nil {
			keptUp.Ids = append(keptUp.Ids, one.Ids...)
			keptUp.QueueIds = append(keptUp.QueueIds, one.QueueIds...)
			keptUp.WorkspaceIds = append(keptUp.WorkspaceIds, one.WorkspaceIds...)
			keptUp.WorkflowDefinitionIds = append(keptUp.WorkflowDefinitionIds, one.WorkflowDefinitionIds...)
			keptUp.WorkflowVersions = append(keptUp.WorkflowVersions, one.WorkflowVersions...)
			keptUp.Inputs = append(keptUp.Inputs, one.Inputs...)
			keptClaim.Ids = append(keptClaim.Ids, claim.Ids[i])
			keptClaim.ExecutionIds = append(keptClaim.ExecutionIds, claim.ExecutionIds[i])
			kept = append(kept, item)
			continue
		}
		s.log.Warn("failing a queue item whose execution cannot be written", "queue_item_id", item.ID, "error", err)
		t, rerr := rejected(item.QueueItem, "execution cannot be written: "+err.Error(), reject)
		if rerr != nil {
			return keptUp, keptClaim, kept, failed, rerr
		}
		failed = append(failed, t)
	}
	return keptUp, keptClaim, kept, failed, nil
}

// rejected is the guarded write of what reject makes of a PENDING item
// that cannot run.
func rejected(item domain.QueueItem, reason string, reject ports.RejectFunc) (ports.QueueTransition, error) {
	next := item
	if err := reject(&next, reason); err != nil {
		return ports.QueueTransition{}, fmt.Errorf("rejecting queue item %s: %w", item.ID, err)
	}
	return ports.QueueTransition{ID: item.ID, FromStatus: item.Status, FromClaimedAt: item.ClaimedAt, To: next.QueueState}, nil
}

// MarkDispatched moves items still in their claim to DISPATCHED, in one
// statement, fenced as ports.DispatchStore says. If a row refuses the
// update, each item is marked on its own so the others are not held back;
// the refused ones are logged and left CLAIMED for stale recovery.
func (s *Store) MarkDispatched(ctx context.Context, fence ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	p := dbsqlc.QueueMarkDispatchedParams{Ids: make([]domain.ID, len(items)), ExecutionIds: make([]domain.ID, len(items))}
	for i, it := range items {
		p.Ids[i], p.ExecutionIds[i] = it.ID, it.ExecutionID
	}
	rows, err := s.markDispatched(ctx, fence, p)
	var rowErr *rowError
	if err != nil && errors.As(asRowError(err), &rowErr) && len(items) > 1 {
		rows, err = nil, nil
		for _, it := range items {
			one, oneErr := s.markDispatched(ctx, fence, dbsqlc.QueueMarkDispatchedParams{
				Ids: []domain.ID{it.ID}, ExecutionIds: []domain.ID{it.ExecutionID},
			})
			if errors.Is(oneErr, ports.ErrLeaseLost) {
				return nil, oneErr
			}
			if oneErr != nil {
				s.log.Error("queue item cannot be marked DISPATCHED; leaving it to stale recovery", "queue_item_id", it.ID, "error", oneErr)
				continue
			}
			rows = append(rows, one...)
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]ports.DispatchedRecord, len(rows))
	for i, r := range rows {
		out[i] = dispatchedRecord(r.ID, r.CreatedAt, r.DispatchedAt, r.AdmissionWaitMs, r.Plan)
	}
	return out, nil
}

// markDispatched runs the marking statement, inside the fence's
// transaction when there is a fence.
func (s *Store) markDispatched(ctx context.Context, fence ports.Fence, p dbsqlc.QueueMarkDispatchedParams) ([]dbsqlc.QueueMarkDispatchedRow, error) {
	if !fence.Fenced() {
		rows, err := s.q.QueueMarkDispatched(ctx, s.pool, p)
		return rows, s.feedWritten(err)
	}
	var rows []dbsqlc.QueueMarkDispatchedRow
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var held ports.Fence
		if err := s.checkFence(ctx, fence, &held)(tx); err != nil {
			return err
		}
		var err error
		rows, err = s.q.QueueMarkDispatched(ctx, tx, p)
		return err
	})
	return rows, err
}

// ApplyTransitions writes domain-computed states in one transaction.
func (s *Store) ApplyTransitions(ctx context.Context, ts []ports.QueueTransition) ([]domain.ID, error) {
	var ids []domain.ID
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		ids, err = s.applyTransitions(ctx, tx, ts, auditDispatcher)
		return err
	})
	return ids, err
}

// The actors of the queue transitions' audit rows in the activity table:
// the role that moved the item, since the store is not told which caller
// asked.
const (
	auditDispatcher = "dispatcher"
	auditAPI        = "api"
	auditWorkflow   = "workflow"
)

// applyTransitions is the one write of per-item transitions: each state
// computed by the domain is written whole, guarded by the state it was
// computed from, with its audit row by actor in the same statement. No
// such transition ends in CLAIMED (the claim is a set-based edge), so the
// statement clears claimed_at, and a state it cannot write faithfully is
// refused.
func (s *Store) applyTransitions(ctx context.Context, tx pgx.Tx, ts []ports.QueueTransition, actor string) ([]domain.ID, error) {
	p := dbsqlc.QueueApplyTransitionsParams{Actor: actor}
	var drop []domain.ID
	for _, t := range ts {
		if t.To.Status == domain.QueueClaimed || t.To.ClaimedAt != nil {
			return nil, fmt.Errorf("queue item %s: a guarded transition cannot end CLAIMED", t.ID)
		}
		p.Ids = append(p.Ids, t.ID)
		p.FromStatuses = append(p.FromStatuses, string(t.FromStatus))
		var from time.Time
		if t.FromClaimedAt != nil {
			from = *t.FromClaimedAt
		}
		p.FromClaimed = append(p.FromClaimed, t.FromClaimedAt != nil)
		p.FromClaimedAts = append(p.FromClaimedAts, from)
		p.Statuses = append(p.Statuses, string(t.To.Status))
		p.AvailableAts = append(p.AvailableAts, t.To.AvailableAt)
		p.AttemptCounts = append(p.AttemptCounts, int32(t.To.AttemptCount))
		p.DispatchFailures = append(p.DispatchFailures, int32(t.To.DispatchFailures))
		p.LastErrors = append(p.LastErrors, t.To.LastError)
		var dropped domain.ID
		if t.DropExecution != nil {
			dropped = *t.DropExecution
		}
		p.DropExecutions = append(p.DropExecutions, t.DropExecution != nil)
		p.DroppedExecutionIds = append(p.DroppedExecutionIds, dropped)
	}
	written, err := s.q.QueueApplyTransitions(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	done := make(map[domain.ID]bool, len(written))
	for _, id := range written {
		done[id] = true
	}
	for _, t := range ts {
		if t.DropExecution != nil && done[t.ID] {
			drop = append(drop, *t.DropExecution)
		}
	}
	if len(drop) > 0 {
		if err := s.q.ExecutionsDelete(ctx, tx, drop); err != nil {
			return nil, err
		}
		wakeAfterCommit(tx, QueueChannel)
	}
	return written, nil
}

// ClaimsOfEndedTerms returns CLAIMED items whose claimer's term is over.
func (s *Store) ClaimsOfEndedTerms(ctx context.Context, limit int) ([]domain.QueueItem, error) {
	rows, err := s.q.QueueClaimsOfEndedTerms(ctx, s.pool, int32(limit))
	if err != nil {
		return nil, err
	}
	return queueFromRows(rows)
}

// ForgetExpiredLeases deletes the expired leases whose names start with
// prefix.
func (s *Store) ForgetExpiredLeases(ctx context.Context, prefix string) (int64, error) {
	return s.q.LeaseForgetExpired(ctx, s.pool, prefix)
}

// StaleClaimed returns items CLAIMED for longer than olderThan.
func (s *Store) StaleClaimed(ctx context.Context, olderThan time.Duration, limit int) ([]domain.QueueItem, error) {
	rows, err := s.q.QueueStaleClaimed(ctx, s.pool, dbsqlc.QueueStaleClaimedParams{OlderThanSeconds: olderThan.Seconds(), MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	return queueFromRows(rows)
}

// RunningAdmittedBefore returns one page of RUNNING executions older than
// olderThan whose item is not still CLAIMED, after the cursor.
func (s *Store) RunningAdmittedBefore(ctx context.Context, olderThan time.Duration, after ports.ExecutionCursor, limit int) ([]domain.Execution, error) {
	rows, err := s.q.ExecutionsRunningStartedBefore(ctx, s.pool, dbsqlc.ExecutionsRunningStartedBeforeParams{
		OlderThanSeconds: olderThan.Seconds(), AfterStartedAt: after.AdmittedAt, AfterID: after.ID, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, err
	}
	out := make([]domain.Execution, len(rows))
	for i, r := range rows {
		out[i] = executionFromRow(r)
	}
	return out, nil
}

// RunningChildren reads the children that the executions' RUNNING
// TEMPORAL_WORKFLOW nodes started.
func (s *Store) RunningChildren(ctx context.Context, executionIDs []domain.ID) ([]ports.RunningChild, error) {
	rows, err := s.q.NodesRunningChildren(ctx, s.pool, executionIDs)
	if err != nil {
		return nil, err
	}
	out := make([]ports.RunningChild, 0, len(rows))
	for _, r := range rows {
		if r.StartedAt == nil {
			continue
		}
		out = append(out, ports.RunningChild{ExecutionID: r.ExecutionID, NodeKey: r.NodeKey, WorkflowID: r.ChildWorkflowID, RunID: r.ChildRunID, StartedAt: *r.StartedAt})
	}
	return out, nil
}

// QueueStatuses reads the current status of the given items.
func (s *Store) QueueStatuses(ctx context.Context, ids []domain.ID) (map[domain.ID]domain.QueueStatus, error) {
	rows, err := s.q.QueueStatusesByIDs(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[domain.ID]domain.QueueStatus, len(rows))
	for _, r := range rows {
		out[r.ID] = domain.QueueStatus(r.Status)
	}
	return out, nil
}

// PurgeIdempotencyKeys deletes keys older than the retention window.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	return s.q.IdempotencyKeysPurge(ctx, s.pool, IdempotencyRetention.Seconds())
}
