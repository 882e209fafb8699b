package app

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// DefinitionReader reads a definition with its current graph.
type DefinitionReader interface {
	GetDefinition(ctx context.Context, id domain.ID) (domain.Definition, error)
}

// WithDefinitions lets runs load the definitions their SUB_WORKFLOW nodes
// run; without it a SUB_WORKFLOW fails.
func WithDefinitions(d DefinitionReader) RunsOption {
	return func(r *Runs) { r.definitions = d }
}

// SubWorkflowGraph loads the graph a SUB_WORKFLOW of workspace runs, and
// its version: definition at version, or at its current version for 0. A
// definition of another workspace is as missing as one that is gone
// (ports.ErrNotFound), so a run never reaches past its workspace.
func (r *Runs) SubWorkflowGraph(ctx context.Context, workspaceID, definitionID domain.ID, version int) (domain.Graph, int, error) {
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
