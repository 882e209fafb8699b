package engine

import (
	"maps"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
)

// QuotaSource gives a workspace's quotas in force (its own where set,
// else its plan's) from memory: the workflow reads them in a side effect,
// which must not wait on I/O (worker.QuotaSnapshot keeps them fresh).
type QuotaSource interface {
	Current(workspaceID domain.ID, plan domain.Plan) (domain.PlanQuotas, bool)
}

// limitsFor is the limits an execution starts with: the worker's, with
// the nodes in flight, workspace share and FOR_EACH cap of in's plan
// replaced by its workspace's quotas in force when the source has them,
// and its Retry-After rounds the workspace's under the worker's ceiling.
// The side effect records the maps as before, so histories recorded
// either way replay alike and no version marker is needed; the new
// figures apply to executions that start after an edit, never to one that
// runs.
func (w *Workflows) limitsFor(in ExecutionInput) RunLimits {
	l := w.Limits.withDefaults()
	if w.Quotas == nil {
		return l
	}
	id, err := uuid.Parse(in.WorkspaceID)
	if err != nil {
		return l
	}
	q, ok := w.Quotas.Current(domain.ID(id), in.Plan)
	if !ok {
		return l
	}
	l.NodesInFlight, l.WorkspaceNodesInFlight, l.ForEachItems = maps.Clone(l.NodesInFlight), maps.Clone(l.WorkspaceNodesInFlight), maps.Clone(l.ForEachItems)
	l.NodesInFlight[in.Plan] = q.NodesInFlight
	l.WorkspaceNodesInFlight[in.Plan] = q.WorkspaceNodesInFlight
	l.ForEachItems[in.Plan] = q.ForEachItems
	l.OutboundPauses = l.OutboundPauses.ForQuota(q.RetryAfterRounds)
	return l
}
