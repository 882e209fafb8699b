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
	// UpdatePlan sets the figures the change gives; ErrNotFound for a
	// plan with no row.
	UpdatePlan(ctx context.Context, plan domain.Plan, change domain.PlanChange) (domain.PlanLimits, error)
	// WorkspaceLimits returns the workspace's own limits, all nil when it
	// has none.
	WorkspaceLimits(ctx context.Context, workspaceID domain.ID) (domain.WorkspaceLimits, error)
	// SetWorkspaceLimits replaces the workspace's own limits; ErrNotFound
	// when the workspace does not exist.
	SetWorkspaceLimits(ctx context.Context, l domain.WorkspaceLimits) (domain.WorkspaceLimits, error)
	// Pool returns the pool every workspace shares, with what runs in it.
	Pool(ctx context.Context) (domain.Pool, error)
	// UpdatePool sets the pool's capacity (nil: none), ordered against
	// every claim as a plan edit is.
	UpdatePool(ctx context.Context, capacity *int) (domain.Pool, error)
}

// QuotaSnapshotReader reads, in one go, what a process needs to resolve
// any workspace's worker-side quotas from memory: every plan's quotas and
// the own quotas of the workspaces that set any of nodes in flight, their
// share of the external-API worker or the FOR_EACH cap (the admin sets
// them one by one, so they are few).
type QuotaSnapshotReader interface {
	QuotaSnapshot(ctx context.Context) (map[domain.Plan]domain.PlanQuotas, map[domain.ID]domain.QuotaOverrides, error)
}
