package worker

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// SubWorkflowStore is what child runs read and count: the definitions
// their SUB_WORKFLOWs run, the workspace's quotas in force, and the
// execution's counter of child-run nodes.
type SubWorkflowStore interface {
	GetDefinition(ctx context.Context, id domain.ID) (domain.Definition, error)
	WorkspaceQuotas(ctx context.Context, workspaceID domain.ID) (domain.PlanQuotas, error)
	// TakeSubWorkflowNodes adds nodes to the execution's count when the
	// sum stays within limit, atomically, and returns the count before
	// and whether they fit.
	TakeSubWorkflowNodes(ctx context.Context, executionID domain.ID, nodes, limit int) (held int, taken bool, err error)
}

// WithDefinitions lets runs start the child runs of their SUB_WORKFLOW
// nodes; without it a SUB_WORKFLOW fails.
func WithDefinitions(d SubWorkflowStore) RunsOption {
	return func(r *Runs) { r.definitions = d }
}

// StartSubWorkflow is a child run's first step, taken inside the child:
// it loads the graph the child runs (definition at version, or its current
// one for 0, which must be of workspace) and counts its nodes against the
// execution's subWorkflowNodes quota in force, every level of child runs
// together. A child past the quota is refused with a *domain.QuotaError
// naming it, before any of its nodes runs. A definition of another
// workspace is as missing as one that is gone (ports.ErrNotFound), so a
// run never reaches past its workspace.
//
// The count is not given back when a child ends: the quota bounds what
// one admission may start in all, not at once (nodes in flight do that).
// A reservation retried after a lost answer counts twice, erring toward
// the quota.
func (r *Runs) StartSubWorkflow(ctx context.Context, workspaceID, executionID, definitionID domain.ID, version int) (domain.Graph, int, error) {
	g, version, err := r.subWorkflowGraph(ctx, workspaceID, definitionID, version)
	if err != nil {
		return domain.Graph{}, 0, err
	}
	quotas, err := r.definitions.WorkspaceQuotas(ctx, workspaceID)
	if err != nil {
		return domain.Graph{}, 0, err
	}
	held, taken, err := r.definitions.TakeSubWorkflowNodes(ctx, executionID, len(g.Nodes), quotas.SubWorkflowNodes)
	if err != nil {
		return domain.Graph{}, 0, err
	}
	if !taken {
		return domain.Graph{}, 0, fmt.Errorf("the execution's child runs hold %d nodes and this one has %d: %w", held, len(g.Nodes),
			&domain.QuotaError{Quota: "nodes in the child runs of one execution (subWorkflowNodes)", Limit: quotas.SubWorkflowNodes})
	}
	return g, version, nil
}

// subWorkflowGraph loads the graph a SUB_WORKFLOW of workspace runs, and
// its version: definition at version, or at its current version for 0.
func (r *Runs) subWorkflowGraph(ctx context.Context, workspaceID, definitionID domain.ID, version int) (domain.Graph, int, error) {
	if r.definitions == nil {
		return domain.Graph{}, 0, fmt.Errorf("%w: this worker reads no definitions", ports.ErrNotFound)
	}
	d, err := r.definitions.GetDefinition(ctx, definitionID)
	if err != nil {
		return domain.Graph{}, 0, err
	}
	if d.WorkspaceID != workspaceID {
		return domain.Graph{}, 0, fmt.Errorf("%w: definition %s is not this workspace's", ports.ErrNotFound, definitionID)
	}
	if version == 0 {
		return d.Graph, d.CurrentVersion, nil
	}
	g, err := r.Graph(ctx, definitionID, version)
	return g, version, err
}
