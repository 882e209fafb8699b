// Package nodes holds the node executors: one file per node type that runs
// as an activity. DELAY is not here because it is a durable timer in the
// workflow itself, not work done by a worker.
//
// Every executor works within Config's bounds: a template budget per node,
// and for HTTP_REQUEST a network guard, a redirect limit and caps on the
// response. Reaching a bound fails the node with a permanent error that
// names it; nothing is cut silently. The output is bounded where it leaves
// the worker, by the engine's payload limit.
package nodes

import "github.com/sluicehq/sluice/ports"

// All returns every executor, for the worker's registry, each bound by cfg
// (zero limits take DefaultConfig's).
func All(cfg Config) []ports.NodeExecutor {
	cfg = cfg.withDefaults()
	return []ports.NodeExecutor{
		NewHTTPRequest(cfg),
		Transform{TemplateBudget: cfg.TemplateBudget},
		Condition{TemplateBudget: cfg.TemplateBudget},
	}
}
