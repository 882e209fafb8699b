package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// CapacityStore reads the series of the console's capacity page.
type CapacityStore interface {
	// Capacity returns, over w, the pool's RUNNING executions within and
	// above their workspaces' floors, and per plan its RUNNING executions,
	// its starts and their admission waits' p50 and p99, a value per
	// step. It leaves the figures set now (the pool's capacity, the
	// plans' limits and floors) unset.
	Capacity(ctx context.Context, w domain.CapacityWindow) (domain.Capacity, error)
}
