package httpapi

import (
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/domain"
)

// planChangeIn is a plan edit: an absent figure is left as it is.
func planChangeIn(b *api.UpdatePlanRequest) domain.PlanChange {
	return domain.PlanChange{MaxRunning: b.MaxRunning, Floor: b.Floor, Weight: b.Weight, RetentionDays: b.RetentionDays, Quotas: domain.QuotaOverrides{
		PendingItems: b.PendingItems, StoredItems: b.StoredItems, Definitions: b.Definitions,
		DefinitionVersions: b.DefinitionVersions, Schedules: b.Schedules,
		ScheduleMinIntervalSeconds: b.ScheduleMinIntervalSeconds, NodeAttempts: b.NodeAttempts,
		NodeTimeoutSeconds: b.NodeTimeoutSeconds, RunTimeoutSeconds: b.RunTimeoutSeconds,
		NodesInFlight: b.NodesInFlight, WorkspaceNodesInFlight: b.WorkspaceNodesInFlight, ForEachItems: b.ForEachItems,
		WebhookEndpoints: b.WebhookEndpoints, OutboundHosts: b.OutboundHosts, SubWorkflowNodes: b.SubWorkflowNodes, StoredExecutions: b.StoredExecutions,
	}}
}

// workspaceQuotasIn are a workspace's own quotas: absent or null keeps
// the plan's.
func workspaceQuotasIn(b *api.SetWorkspaceLimitsRequest) domain.QuotaOverrides {
	return domain.QuotaOverrides{
		PendingItems: b.PendingItems, StoredItems: b.StoredItems, Definitions: b.Definitions,
		DefinitionVersions: b.DefinitionVersions, Schedules: b.Schedules,
		ScheduleMinIntervalSeconds: b.ScheduleMinIntervalSeconds, NodeAttempts: b.NodeAttempts,
		NodeTimeoutSeconds: b.NodeTimeoutSeconds, RunTimeoutSeconds: b.RunTimeoutSeconds,
		NodesInFlight: b.NodesInFlight, WorkspaceNodesInFlight: b.WorkspaceNodesInFlight, ForEachItems: b.ForEachItems,
		WebhookEndpoints: b.WebhookEndpoints, OutboundHosts: b.OutboundHosts, SubWorkflowNodes: b.SubWorkflowNodes, StoredExecutions: b.StoredExecutions,
	}
}

// planQuotasOut sets out's quotas from q.
func planQuotasOut(out *api.PlanLimits, q domain.PlanQuotas) {
	out.PendingItems, out.StoredItems, out.Definitions, out.DefinitionVersions = q.PendingItems, q.StoredItems, q.Definitions, q.DefinitionVersions
	out.Schedules, out.ScheduleMinIntervalSeconds = q.Schedules, q.ScheduleMinIntervalSeconds
	out.NodeAttempts, out.NodeTimeoutSeconds, out.RunTimeoutSeconds = q.NodeAttempts, q.NodeTimeoutSeconds, q.RunTimeoutSeconds
	out.NodesInFlight, out.WorkspaceNodesInFlight, out.ForEachItems = q.NodesInFlight, q.WorkspaceNodesInFlight, q.ForEachItems
	out.WebhookEndpoints, out.OutboundHosts, out.SubWorkflowNodes, out.StoredExecutions = q.WebhookEndpoints, q.OutboundHosts, q.SubWorkflowNodes, q.StoredExecutions
}

// workspaceQuotasOut sets out's own quotas from o (nil is the plan's).
func workspaceQuotasOut(out *api.WorkspaceLimits, o domain.QuotaOverrides) {
	out.PendingItems, out.StoredItems, out.Definitions, out.DefinitionVersions = o.PendingItems, o.StoredItems, o.Definitions, o.DefinitionVersions
	out.Schedules, out.ScheduleMinIntervalSeconds = o.Schedules, o.ScheduleMinIntervalSeconds
	out.NodeAttempts, out.NodeTimeoutSeconds, out.RunTimeoutSeconds = o.NodeAttempts, o.NodeTimeoutSeconds, o.RunTimeoutSeconds
	out.NodesInFlight, out.WorkspaceNodesInFlight, out.ForEachItems = o.NodesInFlight, o.WorkspaceNodesInFlight, o.ForEachItems
	out.WebhookEndpoints, out.OutboundHosts, out.SubWorkflowNodes, out.StoredExecutions = o.WebhookEndpoints, o.OutboundHosts, o.SubWorkflowNodes, o.StoredExecutions
}
