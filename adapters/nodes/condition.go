package nodes

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Condition runs CONDITION nodes: the output is the comparison's result,
// which the scheduler uses to pick the `when` edges to follow.
type Condition struct {
	// TemplateBudget bounds what both operands' templates may produce
	// together; 0 is domain.DefaultTemplateBudget.
	TemplateBudget int
}

// Type is CONDITION.
func (Condition) Type() domain.NodeType { return domain.NodeCondition }

// Execute evaluates the comparison. Its errors are permanent, since the
// same values compare the same way on every attempt: a missing path, or a
// comparison that makes no sense (ordering a number against a string).
func (c Condition) Execute(_ context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeConditionConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	tc := run.Context
	tc.Budget = newBudget(c.TemplateBudget)
	ok, err := domain.EvaluateCondition(cfg, tc)
	if err != nil {
		if errors.Is(err, domain.ErrMissingPath) || errors.Is(err, domain.ErrTemplateBudget) {
			return nil, nil, templateError("", err)
		}
		return nil, nil, ports.Permanent("invalid_comparison", err)
	}
	return nil, ok, nil
}
