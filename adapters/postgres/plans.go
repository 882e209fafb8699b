package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

var (
	_ ports.PlanStore           = (*Store)(nil)
	_ ports.QuotaSnapshotReader = (*Store)(nil)
)

// ListPlans returns every plan's limits, smallest plan first.
func (s *Store) ListPlans(ctx context.Context) ([]domain.PlanLimits, error) {
	rows, err := s.q.PlansList(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := make([]domain.PlanLimits, len(rows))
	for i, r := range rows {
		out[i] = planFromRow(r)
	}
	return out, nil
}

// UpdatePlan sets the figures the change gives, in one write, under the
// limits' write lock once check has passed under it, and wakes the
// dispatchers once it has committed, so a raised limit is used at once.
func (s *Store) UpdatePlan(ctx context.Context, plan domain.Plan, change domain.PlanChange, check ports.LimitsCheck) (domain.PlanLimits, error) {
	var out domain.PlanLimits
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockLimitsAndCheck(ctx, tx, nil, check); err != nil {
			return err
		}
		r, err := s.q.PlanUpdate(ctx, tx, planUpdateParams(plan, change))
		if err != nil {
			return interpretError(err)
		}
		out = planFromRow(r)
		wakeAfterCommit(tx, QueueChannel)
		return nil
	})
	return out, err
}

// WorkspaceLimits returns the workspace's own limits; all nil when it has
// none.
func (s *Store) WorkspaceLimits(ctx context.Context, workspaceID domain.ID) (domain.WorkspaceLimits, error) {
	r, err := s.q.WorkspaceLimitsGet(ctx, s.pool, workspaceID)
	if err != nil {
		if err = interpretError(err); errors.Is(err, ports.ErrNotFound) {
			return domain.WorkspaceLimits{WorkspaceID: workspaceID}, nil
		}
		return domain.WorkspaceLimits{}, err
	}
	return workspaceLimitsFromRow(r), nil
}

// SetWorkspaceLimits replaces the workspace's own limits under the limits'
// write lock once check has passed under it, and wakes the dispatchers, as
// UpdatePlan does.
func (s *Store) SetWorkspaceLimits(ctx context.Context, l domain.WorkspaceLimits, check ports.LimitsCheck) (domain.WorkspaceLimits, error) {
	var out domain.WorkspaceLimits
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockLimitsAndCheck(ctx, tx, &l.WorkspaceID, check); err != nil {
			return err
		}
		r, err := s.q.WorkspaceLimitsSet(ctx, tx, workspaceLimitsParams(l))
		if err != nil {
			return interpretError(err)
		}
		out = workspaceLimitsFromRow(r)
		wakeAfterCommit(tx, QueueChannel)
		return nil
	})
	return out, err
}

// Pool returns the default pool, with what runs in it.
func (s *Store) Pool(ctx context.Context) (domain.Pool, error) {
	r, err := s.q.PoolGet(ctx, s.pool)
	if err != nil {
		return domain.Pool{}, interpretError(err)
	}
	return domain.Pool{Capacity: intPtr(r.Capacity), Running: int(r.Running), Borrowed: int(r.Borrowed), UpdatedAt: r.UpdatedAt}, nil
}

// UpdatePool sets the pool's capacity under the limits' write lock once
// check has passed under it, and wakes the dispatchers, as UpdatePlan
// does.
func (s *Store) UpdatePool(ctx context.Context, capacity *int, check ports.LimitsCheck) (domain.Pool, error) {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockLimitsAndCheck(ctx, tx, nil, check); err != nil {
			return err
		}
		if _, err := s.q.PoolUpdate(ctx, tx, int32Ptr(capacity)); err != nil {
			return interpretError(err)
		}
		wakeAfterCommit(tx, QueueChannel)
		return nil
	})
	if err != nil {
		return domain.Pool{}, err
	}
	return s.Pool(ctx)
}

// lockLimitsAndCheck takes the limits' write lock, which every limits
// edit takes, then reads the limits in force under it and runs check (nil:
// none) on them: the edit's check and its write are one step against
// every other edit. workspace, for a workspace's own limits or plan, names
// the workspace whose plan and own limits the check reads (ErrNotFound
// when it is gone).
func (s *Store) lockLimitsAndCheck(ctx context.Context, tx pgx.Tx, workspace *domain.ID, check ports.LimitsCheck) error {
	if err := s.q.AdmissionLimitsWriteLock(ctx, tx); err != nil {
		return err
	}
	if check == nil {
		return nil
	}
	var in ports.LimitsInForce
	rows, err := s.q.PlansList(ctx, tx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		in.Plans = append(in.Plans, planFromRow(r))
	}
	capacity, err := s.q.PoolCapacity(ctx, tx)
	if err != nil {
		return interpretError(err)
	}
	in.PoolCapacity = intPtr(capacity)
	if workspace != nil {
		w, err := s.q.WorkspaceGet(ctx, tx, *workspace)
		if err != nil {
			return interpretError(err)
		}
		in.WorkspacePlan = workspaceFromRow(w).Plan
		in.Workspace = domain.WorkspaceLimits{WorkspaceID: *workspace}
		own, err := s.q.WorkspaceLimitsGet(ctx, tx, *workspace)
		switch err = interpretError(err); {
		case err == nil:
			in.Workspace = workspaceLimitsFromRow(own)
		case !errors.Is(err, ports.ErrNotFound):
			return err
		}
	}
	return check(in)
}

func planFromRow(r dbsqlc.Plan) domain.PlanLimits {
	return domain.PlanLimits{Plan: domain.Plan(r.Name), MaxRunning: int(r.MaxRunning), Floor: int(r.Floor), Weight: int(r.Weight), Quotas: planQuotasFromRow(r), RetentionDays: int(r.RetentionDays), UpdatedAt: r.UpdatedAt,
		StartRate: startRateFromColumns(r.StartRate, r.StartRatePer, r.StartBurst)}
}

func workspaceLimitsFromRow(r dbsqlc.WorkspaceLimit) domain.WorkspaceLimits {
	out := domain.WorkspaceLimits{WorkspaceID: r.WorkspaceID, Quotas: quotaOverridesFromRow(r), UpdatedAt: r.UpdatedAt, Floor: intPtr(r.Floor)}
	if r.MaxRunning != nil {
		n := int(*r.MaxRunning)
		out.MaxRunning = &n
	}
	out.StartRate = startRateFromColumns(r.StartRate, r.StartRatePer, r.StartBurst)
	return out
}

// startRateToColumns is a start rate as its three nullable columns.
func startRateToColumns(r *domain.StartRate) (rate *int32, per *string, burst *int32) {
	if r == nil {
		return nil, nil, nil
	}
	n, p, b := int32(r.Rate), string(r.Per), int32(r.Burst)
	return &n, &p, &b
}

// startRateFromColumns reads the three columns back; nil when unset.
func startRateFromColumns(rate *int32, per *string, burst *int32) *domain.StartRate {
	if rate == nil || per == nil || burst == nil {
		return nil
	}
	return &domain.StartRate{Rate: int(*rate), Per: domain.RatePeriod(*per), Burst: int(*burst)}
}
