package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Plans are the use cases of limits as data: the admin reads and edits
// each plan's limits and sets a workspace's own; a workspace key may read
// its own workspace's limits, and nothing else here.
type Plans struct {
	plans      ports.PlanStore
	workspaces ports.WorkspaceStore
	worker     ExternalWorker
}

// ExternalWorker is what the API knows of the external-API worker, so an
// admin who gives a workspace more of it than one worker has is told
// (domain.WorkerShareWarning).
type ExternalWorker struct {
	// Slots is one worker's external-API slots
	// (SLUICE_WORKER_EXTERNAL_API_CONCURRENCY as this process reads it);
	// zero when unknown, and then nothing is said.
	Slots int
	// Log gets a line for each warned edit; nil logs nothing.
	Log *slog.Logger
	// Warned counts the warned edits; nil counts nothing.
	Warned prometheus.Counter
}

// NewExternalWorker is an ExternalWorker of slots whose warnings are
// logged to log and counted in limits_worker_share_warnings_total,
// registered with reg.
func NewExternalWorker(slots int, reg prometheus.Registerer, log *slog.Logger) ExternalWorker {
	warned := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "limits_worker_share_warnings_total",
		Help: "Plan or workspace limit edits saved with a workspaceNodesInFlight above one external-API worker's slots.",
	})
	reg.MustRegister(warned)
	return ExternalWorker{Slots: slots, Log: log, Warned: warned}
}

// NewPlans builds the plan use cases; worker may be zero, and then no
// edit is warned about.
func NewPlans(plans ports.PlanStore, workspaces ports.WorkspaceStore, worker ExternalWorker) *Plans {
	return &Plans{plans: plans, workspaces: workspaces, worker: worker}
}

// warnings are the warnings of an edit that leaves a workspace share of
// share (nil: none set), logged and counted.
func (s *Plans) warnings(share *int, what string, attrs ...any) []string {
	if share == nil {
		return nil
	}
	w := domain.WorkerShareWarning(*share, s.worker.Slots)
	if w == "" {
		return nil
	}
	if s.worker.Log != nil {
		s.worker.Log.Warn("limits edited above the external worker's slots", append([]any{"limits", what, "warning", w}, attrs...)...)
	}
	if s.worker.Warned != nil {
		s.worker.Warned.Inc()
	}
	return []string{w}
}

// ListPlans returns every plan's limits. Admin only.
func (s *Plans) ListPlans(ctx context.Context, a domain.Actor) ([]domain.PlanLimits, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	return s.plans.ListPlans(ctx)
}

// UpdatePlan sets the figures the change gives: the concurrency limit is
// used by the next claim of every dispatcher, a quota by the next request
// that spends it. A lower figure cancels and deletes nothing: it refuses
// new admissions or spending until the workspaces are under it. Every
// figure is checked before anything is written. Admin only. The
// warnings say what the plan now allows that the service cannot give
// (see ExternalWorker); the edit is saved all the same.
func (s *Plans) UpdatePlan(ctx context.Context, a domain.Actor, plan domain.Plan, change domain.PlanChange) (domain.PlanLimits, []string, error) {
	if err := requireAdmin(a); err != nil {
		return domain.PlanLimits{}, nil, err
	}
	if _, err := domain.ParsePlan(string(plan)); err != nil {
		return domain.PlanLimits{}, nil, ports.ErrNotFound
	}
	if err := checkLimits(change.MaxRunning, change.Quotas, change.RetentionDays); err != nil {
		return domain.PlanLimits{}, nil, err
	}
	if r := change.StartRate; !r.Keep && r.Rate != nil {
		if err := domain.CheckStartRate(*r.Rate, "/startRate"); err != nil {
			return domain.PlanLimits{}, nil, err
		}
	}
	p, err := s.plans.UpdatePlan(ctx, plan, change)
	if err != nil {
		return domain.PlanLimits{}, nil, err
	}
	return p, s.warnings(&p.Quotas.WorkspaceNodesInFlight, "plan", "plan", string(p.Plan)), nil
}

// WorkspaceLimits returns a workspace's own limits. The admin, or the
// workspace's own key.
func (s *Plans) WorkspaceLimits(ctx context.Context, a domain.Actor, id domain.ID) (domain.WorkspaceLimits, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, id); err != nil {
		return domain.WorkspaceLimits{}, err
	}
	if err := requireWorkspace(a, id, "workspace"); err != nil {
		return domain.WorkspaceLimits{}, err
	}
	return s.plans.WorkspaceLimits(ctx, id)
}

// SetWorkspaceLimits replaces a workspace's own limits (nil keeps its
// plan's). Admin only: a tenant cannot raise its own limits. The warnings
// are UpdatePlan's, for the workspace's own figures.
func (s *Plans) SetWorkspaceLimits(ctx context.Context, a domain.Actor, l domain.WorkspaceLimits) (domain.WorkspaceLimits, []string, error) {
	if err := requireAdmin(a); err != nil {
		return domain.WorkspaceLimits{}, nil, err
	}
	if err := checkLimits(l.MaxRunning, l.Quotas, nil); err != nil {
		return domain.WorkspaceLimits{}, nil, err
	}
	if l.StartRate != nil {
		if err := domain.CheckStartRate(*l.StartRate, "/startRate"); err != nil {
			return domain.WorkspaceLimits{}, nil, err
		}
	}
	saved, err := s.plans.SetWorkspaceLimits(ctx, l)
	if err != nil {
		return domain.WorkspaceLimits{}, nil, err
	}
	return saved, s.warnings(saved.Quotas.WorkspaceNodesInFlight, "workspace", "workspace_id", saved.WorkspaceID.String()), nil
}

// checkLimits refuses, in one 422 naming every field at fault, a
// concurrency limit, quota or retention out of its range.
func checkLimits(maxRunning *int, quotas domain.QuotaOverrides, retentionDays *int) error {
	var problems []domain.Problem
	retention := error(nil)
	if retentionDays != nil {
		retention = domain.CheckRetentionDays(*retentionDays, "/retentionDays")
	}
	for _, err := range []error{checkMaxRunning(maxRunning), quotas.Check(), retention} {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			problems = append(problems, ve.Problems...)
		} else if err != nil {
			return err
		}
	}
	if len(problems) > 0 {
		return &domain.ValidationError{Problems: problems}
	}
	return nil
}

func checkMaxRunning(n *int) error {
	if n == nil {
		return nil
	}
	return domain.CheckMaxRunning(*n, "/maxRunning")
}
