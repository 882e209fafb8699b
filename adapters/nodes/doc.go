// Package nodes holds the node executors: one file per node type that runs
// as an activity. DELAY is not here because it is a durable timer in the
// workflow itself, not work done by a worker.
package nodes

import "github.com/sluicehq/sluice/ports"

// All returns every executor, for the worker's registry.
func All(http *HTTPRequest) []ports.NodeExecutor {
	return []ports.NodeExecutor{http, Transform{}, Condition{}}
}
