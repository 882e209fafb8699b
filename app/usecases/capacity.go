package usecases

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Capacity is the use case of the console's capacity page: the pool's use
// and each plan's admission waits over the last hour at most.
type Capacity struct {
	series ports.CapacityStore
	now    func() time.Time
}

// NewCapacity builds the capacity use case.
func NewCapacity(series ports.CapacityStore) *Capacity {
	return &Capacity{series: series, now: time.Now}
}

// Series returns the window of windowSeconds ending now in steps of
// stepSeconds (domain.NewCapacityWindow bounds both), each step with the
// pool's capacity and every plan's limit and floor as they stood at its
// end. Admin only.
func (c *Capacity) Series(ctx context.Context, a domain.Actor, windowSeconds, stepSeconds int) (domain.Capacity, error) {
	if err := requireAdmin(a); err != nil {
		return domain.Capacity{}, err
	}
	w, err := domain.NewCapacityWindow(c.now(), windowSeconds, stepSeconds)
	if err != nil {
		return domain.Capacity{}, err
	}
	return c.series.Capacity(ctx, w)
}
