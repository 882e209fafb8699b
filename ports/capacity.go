package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// CapacityStore reads the series of the console's capacity page.
type CapacityStore interface {
	// Capacity returns, over w, a value per step: the pool's capacity
	// and every plan's limit and floor as they stood at the step's end,
	// the pool's RUNNING executions within and above their workspaces'
	// floors as they stood then, and per plan its RUNNING executions, its
	// starts and their admission waits' p50 and p99. Every plan has its
	// series, in the order of domain.Plans.
	Capacity(ctx context.Context, w domain.CapacityWindow) (domain.Capacity, error)
}
