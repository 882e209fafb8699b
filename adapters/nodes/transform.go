package nodes

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Transform runs TRANSFORM nodes: the output is the config's output tree
// with its templates resolved.
type Transform struct{}

// Type is TRANSFORM.
func (Transform) Type() domain.NodeType { return domain.NodeTransform }

// Execute resolves the output. A bad template cannot get better on retry,
// so every error is permanent.
func (Transform) Execute(_ context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeTransformConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	out, err := domain.ResolveJSON(cfg.Output, run.Context)
	if err != nil {
		return nil, nil, ports.Permanent(templateKind(err), err)
	}
	return nil, out, nil
}

func templateKind(err error) string {
	if errors.Is(err, domain.ErrMissingPath) {
		return "missing_path"
	}
	return "template"
}
