package postgres

import (
	"context"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// WorkspaceQuotas returns the quotas in force for a workspace: its own
// where set, else its plan's.
func (s *Store) WorkspaceQuotas(ctx context.Context, workspaceID domain.ID) (domain.PlanQuotas, error) {
	return s.workspaceQuotas(ctx, s.pool, workspaceID)
}

// workspaceQuotas reads a workspace's quotas in force through db: inside
// the transaction that spends one, after the lock that orders that
// spending, so an edit that has committed is used by the next request.
func (s *Store) workspaceQuotas(ctx context.Context, db dbsqlc.DBTX, workspaceID domain.ID) (domain.PlanQuotas, error) {
	r, err := s.q.WorkspaceQuotasGet(ctx, db, workspaceID)
	if err != nil {
		return domain.PlanQuotas{}, interpretError(err)
	}
	return domain.PlanQuotas{
		PendingItems: int(r.PendingItems), StoredItems: int(r.StoredItems), Definitions: int(r.Definitions),
		DefinitionVersions: int(r.DefinitionVersions), Schedules: int(r.Schedules),
		ScheduleMinIntervalSeconds: int(r.ScheduleMinIntervalSeconds), NodeAttempts: int(r.NodeAttempts),
		NodeTimeoutSeconds: int(r.NodeTimeoutSeconds), RunTimeoutSeconds: int(r.RunTimeoutSeconds),
		NodesInFlight: int(r.NodesInFlight), WorkspaceNodesInFlight: int(r.WorkspaceNodesInFlight), ForEachItems: int(r.ForEachItems),
		WebhookEndpoints: int(r.WebhookEndpoints), OutboundHosts: int(r.OutboundHosts), SubWorkflowNodes: int(r.SubWorkflowNodes), StoredExecutions: int(r.StoredExecutions),
	}, nil
}

// planQuotasFromRow reads a plans row's quotas.
func planQuotasFromRow(r dbsqlc.Plan) domain.PlanQuotas {
	return domain.PlanQuotas{
		PendingItems: int(r.PendingItems), StoredItems: int(r.StoredItems), Definitions: int(r.Definitions),
		DefinitionVersions: int(r.DefinitionVersions), Schedules: int(r.Schedules),
		ScheduleMinIntervalSeconds: int(r.ScheduleMinIntervalSeconds), NodeAttempts: int(r.NodeAttempts),
		NodeTimeoutSeconds: int(r.NodeTimeoutSeconds), RunTimeoutSeconds: int(r.RunTimeoutSeconds),
		NodesInFlight: int(r.NodesInFlight), WorkspaceNodesInFlight: int(r.WorkspaceNodesInFlight), ForEachItems: int(r.ForEachItems),
		WebhookEndpoints: int(r.WebhookEndpoints), OutboundHosts: int(r.OutboundHosts), SubWorkflowNodes: int(r.SubWorkflowNodes), StoredExecutions: int(r.StoredExecutions),
	}
}

// quotaOverridesFromRow reads a workspace_limits row's own quotas.
func quotaOverridesFromRow(r dbsqlc.WorkspaceLimit) domain.QuotaOverrides {
	return domain.QuotaOverrides{
		PendingItems: intPtr(r.PendingItems), StoredItems: intPtr(r.StoredItems), Definitions: intPtr(r.Definitions),
		DefinitionVersions: intPtr(r.DefinitionVersions), Schedules: intPtr(r.Schedules),
		ScheduleMinIntervalSeconds: intPtr(r.ScheduleMinIntervalSeconds), NodeAttempts: intPtr(r.NodeAttempts),
		NodeTimeoutSeconds: intPtr(r.NodeTimeoutSeconds), RunTimeoutSeconds: intPtr(r.RunTimeoutSeconds),
		NodesInFlight: intPtr(r.NodesInFlight), WorkspaceNodesInFlight: intPtr(r.WorkspaceNodesInFlight), ForEachItems: intPtr(r.ForEachItems),
		WebhookEndpoints: intPtr(r.WebhookEndpoints), OutboundHosts: intPtr(r.OutboundHosts), SubWorkflowNodes: intPtr(r.SubWorkflowNodes), StoredExecutions: intPtr(r.StoredExecutions),
	}
}

// planUpdateParams are the figures a plan edit sets (nil leaves one as
// it is) and, unless it keeps it, the start rate.
func planUpdateParams(plan domain.Plan, c domain.PlanChange) dbsqlc.PlanUpdateParams {
	o := c.Quotas
	p := dbsqlc.PlanUpdateParams{
		Name: string(plan), MaxRunning: int32Ptr(c.MaxRunning), RetentionDays: int32Ptr(c.RetentionDays),
		Floor: int32Ptr(c.Floor), Weight: int32Ptr(c.Weight),
		PendingItems: int32Ptr(o.PendingItems), StoredItems: int32Ptr(o.StoredItems), Definitions: int32Ptr(o.Definitions),
		DefinitionVersions: int32Ptr(o.DefinitionVersions), Schedules: int32Ptr(o.Schedules),
		ScheduleMinIntervalSeconds: int32Ptr(o.ScheduleMinIntervalSeconds), NodeAttempts: int32Ptr(o.NodeAttempts),
		NodeTimeoutSeconds: int32Ptr(o.NodeTimeoutSeconds), RunTimeoutSeconds: int32Ptr(o.RunTimeoutSeconds),
		NodesInFlight: int32Ptr(o.NodesInFlight), WorkspaceNodesInFlight: int32Ptr(o.WorkspaceNodesInFlight), ForEachItems: int32Ptr(o.ForEachItems),
		WebhookEndpoints: int32Ptr(o.WebhookEndpoints), OutboundHosts: int32Ptr(o.OutboundHosts), SubWorkflowNodes: int32Ptr(o.SubWorkflowNodes), StoredExecutions: int32Ptr(o.StoredExecutions),
		SetStartRate: !c.StartRate.Keep,
	}
	if p.SetStartRate {
		p.StartRate, p.StartRatePer, p.StartBurst = startRateToColumns(c.StartRate.Rate)
	}
	return p
}

// workspaceLimitsParams are a workspace's own limits (nil keeps its
// plan's).
func workspaceLimitsParams(l domain.WorkspaceLimits) dbsqlc.WorkspaceLimitsSetParams {
	o := l.Quotas
	p := dbsqlc.WorkspaceLimitsSetParams{
		WorkspaceID: l.WorkspaceID, MaxRunning: int32Ptr(l.MaxRunning), Floor: int32Ptr(l.Floor),
		PendingItems: int32Ptr(o.PendingItems), StoredItems: int32Ptr(o.StoredItems), Definitions: int32Ptr(o.Definitions),
		DefinitionVersions: int32Ptr(o.DefinitionVersions), Schedules: int32Ptr(o.Schedules),
		ScheduleMinIntervalSeconds: int32Ptr(o.ScheduleMinIntervalSeconds), NodeAttempts: int32Ptr(o.NodeAttempts),
		NodeTimeoutSeconds: int32Ptr(o.NodeTimeoutSeconds), RunTimeoutSeconds: int32Ptr(o.RunTimeoutSeconds),
		NodesInFlight: int32Ptr(o.NodesInFlight), WorkspaceNodesInFlight: int32Ptr(o.WorkspaceNodesInFlight), ForEachItems: int32Ptr(o.ForEachItems),
		WebhookEndpoints: int32Ptr(o.WebhookEndpoints), OutboundHosts: int32Ptr(o.OutboundHosts), SubWorkflowNodes: int32Ptr(o.SubWorkflowNodes), StoredExecutions: int32Ptr(o.StoredExecutions),
	}
	p.StartRate, p.StartRatePer, p.StartBurst = startRateToColumns(l.StartRate)
	return p
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v)
	return &n
}

// RetentionDays reads every plan's retention, in days.
func (s *Store) RetentionDays(ctx context.Context) (map[domain.Plan]int, error) {
	plans, err := s.q.PlansList(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := make(map[domain.Plan]int, len(plans))
	for _, r := range plans {
		out[domain.Plan(r.Name)] = int(r.RetentionDays)
	}
	return out, nil
}

// QuotaSnapshot reads every plan's quotas and the worker-side quotas of
// the workspaces that set their own.
func (s *Store) QuotaSnapshot(ctx context.Context) (map[domain.Plan]domain.PlanQuotas, map[domain.ID]domain.QuotaOverrides, error) {
	plans, err := s.q.PlansList(ctx, s.pool)
	if err != nil {
		return nil, nil, err
	}
	own, err := s.q.WorkspaceQuotasWorkerOverrides(ctx, s.pool)
	if err != nil {
		return nil, nil, err
	}
	byPlan := make(map[domain.Plan]domain.PlanQuotas, len(plans))
	for _, r := range plans {
		byPlan[domain.Plan(r.Name)] = planQuotasFromRow(r)
	}
	byWorkspace := make(map[domain.ID]domain.QuotaOverrides, len(own))
	for _, r := range own {
		byWorkspace[r.WorkspaceID] = domain.QuotaOverrides{
			NodesInFlight: intPtr(r.NodesInFlight), WorkspaceNodesInFlight: intPtr(r.WorkspaceNodesInFlight), ForEachItems: intPtr(r.ForEachItems),
		}
	}
	return byPlan, byWorkspace, nil
}
