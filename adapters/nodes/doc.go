// Package nodes holds the node executors: one file per node type that runs
// as an activity. DELAY is not here because it is a durable timer in the
// workflow itself, not work done by a worker.
//
// Every executor works within Config's bounds: a template budget per node,
// a cap on the output, and for HTTP_REQUEST a network guard, a redirect
// limit and caps on the response. Reaching a bound fails the node with a
// permanent error that names it; nothing is cut silently.
package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/ports"
)

// All returns every executor, for the worker's registry, each bound by cfg
// (zero limits take DefaultConfig's).
func All(cfg Config) []ports.NodeExecutor {
	cfg = cfg.withDefaults()
	return []ports.NodeExecutor{
		capped{NewHTTPRequest(cfg), cfg.OutputMax},
		capped{Transform{TemplateBudget: cfg.TemplateBudget}, cfg.OutputMax},
		capped{Condition{TemplateBudget: cfg.TemplateBudget}, cfg.OutputMax},
	}
}

// capped fails a node whose output is over max bytes as JSON, before it is
// recorded or handed to Temporal.
type capped struct {
	ports.NodeExecutor
	max int
}

// Execute runs the node and measures its output.
func (c capped) Execute(ctx context.Context, run ports.NodeRun) (any, any, error) {
	in, out, err := c.NodeExecutor.Execute(ctx, run)
	if err != nil || out == nil {
		return in, out, err
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return in, nil, ports.Permanent("invalid_output", fmt.Errorf("output is not JSON: %w", err))
	}
	if len(raw) > c.max {
		return in, nil, ports.Permanent("output_too_large", fmt.Errorf("%s output is %d bytes as JSON, over the limit of %d bytes (%s)",
			c.Type(), len(raw), c.max, EnvOutputMax))
	}
	return in, json.RawMessage(raw), nil
}
