package nodes

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Transform runs TRANSFORM nodes: the output is the config's output tree
// with its templates resolved.
type Transform struct {
	// TemplateBudget bounds what the output's templates may produce; 0 is
	// domain.DefaultTemplateBudget.
	TemplateBudget int
}

// Type is TRANSFORM.
func (Transform) Type() domain.NodeType { return domain.NodeTransform }

// Execute resolves the output. A bad template cannot get better on retry,
// so every error is permanent.
func (t Transform) Execute(_ context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeTransformConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	tc := run.Context
	tc.Budget = newBudget(t.TemplateBudget)
	out, err := domain.ResolveJSON(cfg.Output, tc)
	if err != nil {
		return nil, nil, templateError("", err)
	}
	return nil, out, nil
}

// newBudget is one node's template budget, of limit bytes or the default.
func newBudget(limit int) *domain.TemplateBudget {
	if limit <= 0 {
		limit = domain.DefaultTemplateBudget
	}
	return domain.NewTemplateBudget(limit)
}

// templateError makes a resolution error of a config field permanent, with
// a kind that tells a missing path and an exhausted budget from other
// template errors. field, when set, prefixes the message.
func templateError(field string, err error) error {
	if field != "" {
		err = fmt.Errorf("%s: %w", field, err)
	}
	switch {
	case errors.Is(err, domain.ErrMissingPath):
		return ports.Permanent("missing_path", err)
	case errors.Is(err, domain.ErrTemplateBudget):
		return ports.Permanent("template_budget", fmt.Errorf("%w (%s)", err, EnvTemplateBudget))
	}
	return ports.Permanent("template", err)
}
