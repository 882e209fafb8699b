package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// PlanStore keeps the plans' limits and the workspaces' own limits. An
// edit is ordered against every claim: once it returns, no claim admits by
// the value it replaced, and the dispatchers are woken to use it.
type PlanStore interface {
	ListPlans(ctx context.Context) ([]domain.PlanLimits, error)
	// UpdatePlan sets the figures the change gives, if check (nil: none)
	// passes on the limits in force inside the write's transaction;
	// ErrNotFound for a plan with no row.
	UpdatePlan(ctx context.Context, plan domain.Plan, change domain.PlanChange, check LimitsCheck) (domain.PlanLimits, error)
	// WorkspaceLimits returns the workspace's own limits, all nil when it
	// has none.
	WorkspaceLimits(ctx context.Context, workspaceID domain.ID) (domain.WorkspaceLimits, error)
	// SetWorkspaceLimits replaces the workspace's own limits, if check
	// passes as UpdatePlan's does; ErrNotFound when the workspace does not
	// exist.
	SetWorkspaceLimits(ctx context.Context, l domain.WorkspaceLimits, check LimitsCheck) (domain.WorkspaceLimits, error)
	// Pool returns the pool every workspace shares, with what runs in it.
	Pool(ctx context.Context) (domain.Pool, error)
	// UpdatePool sets the pool's capacity (nil: none), ordered against
	// every claim as a plan edit is, if check passes as UpdatePlan's does.
	UpdatePool(ctx context.Context, capacity *int, check LimitsCheck) (domain.Pool, error)
}

// LimitsInForce is what a limits edit is checked against: the pool's
// capacity and every plan's limits as they stand inside the edit's
// transaction, after every earlier edit and before any later one.
type LimitsInForce struct {
	// PoolCapacity is the pool's capacity; nil for none.
	PoolCapacity *int
	Plans        []domain.PlanLimits
	// WorkspacePlan is the plan of the workspace whose own limits or plan
	// are edited; "" for a plan or pool edit.
	WorkspacePlan domain.Plan
	// Workspace is that workspace's own limits as stored (all nil when it
	// has none); zero for a plan or pool edit.
	Workspace domain.WorkspaceLimits
}

// LimitsCheck decides whether a limits edit may be written, given the
// limits in force (app's rule; the store only runs it). The store runs it
// inside the edit's transaction, holding the lock every limits edit takes,
// so two edits that each pass alone cannot both be written when together
// they break the rule; its error refuses the edit and writes nothing.
type LimitsCheck func(LimitsInForce) error

// QuotaSnapshotReader reads, in one go, what a process needs to resolve
// any workspace's worker-side quotas from memory: every plan's quotas and
// the own quotas of the workspaces that set any of nodes in flight, their
// share of the external-API worker or the FOR_EACH cap (the admin sets
// them one by one, so they are few).
type QuotaSnapshotReader interface {
	QuotaSnapshot(ctx context.Context) (map[domain.Plan]domain.PlanQuotas, map[domain.ID]domain.QuotaOverrides, error)
}
