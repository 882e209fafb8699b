package usecases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// definitionsOnly is a DefinitionStore that stores what it is given; the
// methods a test does not reach stay nil and would panic.
type definitionsOnly struct {
	ports.DefinitionStore
	created []domain.Definition
}

func (d *definitionsOnly) GetDefinition(_ context.Context, id domain.ID) (domain.Definition, error) {
	for _, def := range d.created {
		if def.ID == id {
			return def, nil
		}
	}
	return domain.Definition{}, ports.ErrNotFound
}

func (d *definitionsOnly) CreateDefinition(_ context.Context, def domain.Definition) (domain.Definition, error) {
	d.created = append(d.created, def)
	return def, nil
}

type oneWorkspace struct {
	ports.WorkspaceStore
	w domain.Workspace
}

func (o oneWorkspace) GetWorkspace(_ context.Context, id domain.ID) (domain.Workspace, error) {
	if id != o.w.ID {
		return domain.Workspace{}, ports.ErrNotFound
	}
	return o.w, nil
}

// WorkspaceQuotas gives the workspace caps wide enough for any test graph.
func (o oneWorkspace) WorkspaceQuotas(_ context.Context, id domain.ID) (domain.PlanQuotas, error) {
	if id != o.w.ID {
		return domain.PlanQuotas{}, ports.ErrNotFound
	}
	return domain.PlanQuotas{NodeAttempts: 100, NodeTimeoutSeconds: 86_400, RunTimeoutSeconds: 86_400, SubWorkflowNodes: 1_000}, nil
}

// TestSavingRefusesFanOutPastTheConfiguredBudget: a definition is judged
// against the template budget its nodes will run with, not the default.
func TestSavingRefusesFanOutPastTheConfiguredBudget(t *testing.T) {
	t.Parallel()
	ws := domain.Workspace{ID: domain.ID{1}, Plan: domain.PlanPro}
	admin := domain.Actor{Admin: true}
	literal := strings.Repeat("x", 4<<10)
	graph := domain.Graph{Nodes: []domain.Node{{Key: "big", Type: domain.NodeTransform, Config: json.RawMessage(fmt.Sprintf(`{"output": %q}`, literal))}}}

	store := &definitionsOnly{}
	defaults := NewDefinitions(store, oneWorkspace{w: ws}, domain.DefaultProcessQuotas(), domain.DefaultTemplateBudget)
	saved, err := defaults.CreateDefinition(context.Background(), admin, ws.ID, "big", graph)
	if err != nil {
		t.Fatalf("4 KiB of literal text under the default 1 MiB budget: %v", err)
	}

	small := NewDefinitions(store, oneWorkspace{w: ws}, domain.DefaultProcessQuotas(), 1<<10)
	_, err = small.CreateDefinition(context.Background(), admin, ws.ID, "big", graph)
	var invalid *domain.ValidationError
	if !errors.As(err, &invalid) || len(invalid.Problems) != 1 || invalid.Problems[0].Path != "/graph/nodes/0/config" ||
		!strings.Contains(invalid.Problems[0].Message, "budget of 1024 bytes") {
		t.Fatalf("4 KiB of literal text under a 1 KiB budget: %v, want one problem at /graph/nodes/0/config naming the budget", err)
	}
	if len(store.created) != 1 {
		t.Fatalf("a refused definition was stored: %+v", store.created)
	}
	if _, err := small.AddDefinitionVersion(context.Background(), admin, saved.ID, graph); !errors.As(err, &invalid) {
		t.Fatalf("a new version over the budget: %v, want it refused the same way", err)
	}
}

// stalledDefinitions answers no read until the caller gives up, as a
// database too slow for the save's sub-workflow walk would.
type stalledDefinitions struct{ ports.DefinitionStore }

func (stalledDefinitions) GetDefinition(ctx context.Context, _ domain.ID) (domain.Definition, error) {
	<-ctx.Done()
	return domain.Definition{}, ctx.Err()
}

// TestSavingStopsTheSubWorkflowWalkAtItsDeadline: a save whose walk of
// the definitions its SUB_WORKFLOWs reach outlasts SubWorkflowCheck is
// refused at the node, naming the deadline's variable.
func TestSavingStopsTheSubWorkflowWalkAtItsDeadline(t *testing.T) {
	t.Parallel()
	ws := domain.Workspace{ID: domain.ID{1}, Plan: domain.PlanFree}
	quotas := domain.DefaultProcessQuotas()
	quotas.SubWorkflowCheck = 50 * time.Millisecond
	s := NewDefinitions(stalledDefinitions{}, oneWorkspace{w: ws}, quotas, domain.DefaultTemplateBudget)
	graph := domain.Graph{Nodes: []domain.Node{{Key: "sub", Type: domain.NodeSubWorkflow,
		Config: json.RawMessage(`{"definition": "0b6f5a2c-8d3e-4f7a-a1b2-c3d4e5f60718"}`)}}}
	began := time.Now()
	_, err := s.CreateDefinition(context.Background(), domain.Actor{Admin: true}, ws.ID, "slow", graph)
	took := time.Since(began)
	var invalid *domain.ValidationError
	if !errors.As(err, &invalid) || len(invalid.Problems) != 1 || invalid.Problems[0].Path != "/graph/nodes/0/config/definition" ||
		!strings.Contains(invalid.Problems[0].Message, "longer than its limit of 50ms (SLUICE_SUBWORKFLOW_CHECK_TIMEOUT)") {
		t.Fatalf("a walk past its deadline: %v, want one problem at the node naming the deadline", err)
	}
	if took > 10*time.Second {
		t.Errorf("the save took %s, want it to end at the 50 ms deadline", took)
	}
}
