package usecases

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Definitions are the use cases of workflow definitions: commands create,
// version and delete them, queries show them. A graph is validated before
// it is stored, so every stored version can run.
type Definitions struct {
	definitions ports.DefinitionStore
	workspaces  ports.WorkspaceStore
	quotas      domain.ProcessQuotas
	// templateBudget is the bytes a node's templates may produce when it
	// runs; a graph whose templates can never fit in it is refused.
	templateBudget int
	// allowLists and reserved decide what TEMPORAL_WORKFLOW nodes may
	// start (CheckingAllowLists); nil allows nothing.
	allowLists ports.AllowLists
	reserved   domain.ReservedTaskQueues
}

// CheckingAllowLists has saves refuse a graph whose TEMPORAL_WORKFLOW
// nodes start what the workspace's allow-list does not permit, reserved
// (Sluice's own queues) never being permitted; without it a graph with
// any TEMPORAL_WORKFLOW is refused.
func (s *Definitions) CheckingAllowLists(lists ports.AllowLists, reserved domain.ReservedTaskQueues) *Definitions {
	s.allowLists, s.reserved = lists, reserved
	return s
}

// NewDefinitions builds the definition use cases. templateBudget is the
// node template budget the workers run with (SLUICE_NODE_TEMPLATE_BUDGET).
func NewDefinitions(definitions ports.DefinitionStore, workspaces ports.WorkspaceStore, quotas domain.ProcessQuotas, templateBudget int) *Definitions {
	return &Definitions{definitions: definitions, workspaces: workspaces, quotas: quotas, templateBudget: templateBudget}
}

// CreateDefinition validates the graph and stores it as version 1.
func (s *Definitions) CreateDefinition(ctx context.Context, a domain.Actor, workspaceID domain.ID, name string, graph domain.Graph) (domain.Definition, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return domain.Definition{}, err
	}
	if err := s.quotas.CheckGraph(graph, "/graph"); err != nil {
		return domain.Definition{}, err
	}
	ws, err := s.workspaces.GetWorkspace(ctx, workspaceID)
	if err != nil {
		return domain.Definition{}, err
	}
	if err := s.validateGraph(ctx, graph, ws.ID, "/graph"); err != nil {
		return domain.Definition{}, err
	}
	id := domain.ID(uuid.New())
	if err := s.checkSubWorkflows(ctx, workspaceID, id, graph); err != nil {
		return domain.Definition{}, err
	}
	return s.definitions.CreateDefinition(ctx, domain.Definition{ID: id, WorkspaceID: workspaceID, Name: name, Graph: graph})
}

// validateGraph checks the graph's structure, then its template fan-out
// against the budget, its policies against the workspace's caps in force
// (read now, so an edit applies to the next save) and its
// TEMPORAL_WORKFLOWs against the workspace's allow-list, reporting
// problems under prefix.
func (s *Definitions) validateGraph(ctx context.Context, g domain.Graph, workspaceID domain.ID, prefix string) error {
	err := g.Validate()
	if err == nil {
		err = g.CheckTemplateFanOut(s.templateBudget)
	}
	if err == nil {
		var quotas domain.PlanQuotas
		if quotas, err = s.workspaces.WorkspaceQuotas(ctx, workspaceID); err != nil {
			return err
		}
		err = g.CheckPolicies(quotas.PolicyCaps())
	}
	if err == nil && g.UsesTemporalWorkflows() {
		var l domain.AllowList
		if l, err = worker.AllowList(ctx, s.allowLists, s.reserved, workspaceID); err != nil {
			return err
		}
		err = g.CheckAllowList(l)
	}
	if err == nil {
		return nil
	}
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	problems := make([]domain.Problem, len(ve.Problems))
	for i, p := range ve.Problems {
		problems[i] = domain.Problem{Path: prefix + p.Path, Message: p.Message}
	}
	return InvalidGraph(&domain.ValidationError{Problems: problems})
}

// checkSubWorkflows refuses, as a 422 naming the node's config.definition,
// a graph whose SUB_WORKFLOWs name a definition of another workspace or
// none, nest past domain.MaxSubWorkflowDepth, lead back to definition id,
// or would start child runs of more nodes than the workspace's
// subWorkflowNodes quota (domain.CheckSubWorkflows). The walk loads each
// definition version once and stops at the SubWorkflowCheck deadline.
func (s *Definitions) checkSubWorkflows(ctx context.Context, workspaceID, id domain.ID, graph domain.Graph) error {
	quotas, err := s.workspaces.WorkspaceQuotas(ctx, workspaceID)
	if err != nil {
		return err
	}
	deadline, cancel := context.WithTimeout(ctx, s.quotas.SubWorkflowCheck)
	defer cancel()
	err = domain.CheckSubWorkflows(id, graph, quotas.SubWorkflowNodes, func(def domain.ID, version int) (domain.Graph, error) {
		g, loadErr := s.subWorkflowGraph(deadline, workspaceID, def, version)
		if deadline.Err() != nil && ctx.Err() == nil {
			return domain.Graph{}, fmt.Errorf("the sub-workflow check took longer than its limit of %s (SLUICE_SUBWORKFLOW_CHECK_TIMEOUT)", s.quotas.SubWorkflowCheck)
		}
		return g, loadErr
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	for i := range ve.Problems {
		ve.Problems[i].Path = "/graph" + ve.Problems[i].Path
	}
	return InvalidGraph(ve)
}

// subWorkflowGraph is the graph of workspace's definition def at version
// (its current one for 0), as the save check sees it.
func (s *Definitions) subWorkflowGraph(ctx context.Context, workspaceID, def domain.ID, version int) (domain.Graph, error) {
	d, err := s.definitions.GetDefinition(ctx, def)
	if err != nil || d.WorkspaceID != workspaceID {
		return domain.Graph{}, errors.New("no such definition in this workspace")
	}
	if version == 0 {
		return d.Graph, nil
	}
	v, err := s.definitions.GetDefinitionVersion(ctx, def, version)
	if err != nil {
		return domain.Graph{}, errors.New("no such version")
	}
	return v.Graph, nil
}

// GetDefinition shows a definition with its current graph.
func (s *Definitions) GetDefinition(ctx context.Context, a domain.Actor, id domain.ID) (domain.Definition, error) {
	d, err := s.definitions.GetDefinition(ctx, id)
	if err != nil {
		return domain.Definition{}, err
	}
	return d, requireWorkspace(a, d.WorkspaceID, "workflow definition")
}

// ListDefinitions lists a workspace's live definitions.
func (s *Definitions) ListDefinitions(ctx context.Context, a domain.Actor, workspaceID domain.ID, page ports.Page) ([]domain.Definition, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.definitions.ListDefinitions(ctx, workspaceID, page)
}

// DeleteDefinition soft-deletes a definition.
func (s *Definitions) DeleteDefinition(ctx context.Context, a domain.Actor, id domain.ID) error {
	if _, err := s.GetDefinition(ctx, a, id); err != nil {
		return err
	}
	return s.definitions.DeleteDefinition(ctx, id)
}

// AddDefinitionVersion validates and stores a new current version.
func (s *Definitions) AddDefinitionVersion(ctx context.Context, a domain.Actor, id domain.ID, graph domain.Graph) (domain.DefinitionVersion, error) {
	def, err := s.GetDefinition(ctx, a, id)
	if err != nil {
		return domain.DefinitionVersion{}, err
	}
	if err = s.quotas.CheckGraph(graph, "/graph"); err != nil {
		return domain.DefinitionVersion{}, err
	}
	ws, err := s.workspaces.GetWorkspace(ctx, def.WorkspaceID)
	if err != nil {
		return domain.DefinitionVersion{}, err
	}
	if err := s.validateGraph(ctx, graph, ws.ID, "/graph"); err != nil {
		return domain.DefinitionVersion{}, err
	}
	if err := s.checkSubWorkflows(ctx, def.WorkspaceID, id, graph); err != nil {
		return domain.DefinitionVersion{}, err
	}
	return s.definitions.AddDefinitionVersion(ctx, id, graph)
}

// GetDefinitionVersion shows one version.
func (s *Definitions) GetDefinitionVersion(ctx context.Context, a domain.Actor, id domain.ID, version int) (domain.DefinitionVersion, error) {
	if _, err := s.GetDefinition(ctx, a, id); err != nil {
		return domain.DefinitionVersion{}, err
	}
	return s.definitions.GetDefinitionVersion(ctx, id, version)
}
