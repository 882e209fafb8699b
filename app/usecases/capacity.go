package usecases

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Capacity is the use case of the console's capacity page: the pool's use
// and each plan's admission waits over the last hour at most.
type Capacity struct {
	series ports.CapacityStore
	plans  ports.PlanStore
	now    func() time.Time
}

// NewCapacity builds the capacity use case.
func NewCapacity(series ports.CapacityStore, plans ports.PlanStore) *Capacity {
	return &Capacity{series: series, plans: plans, now: time.Now}
}

// Series returns the window of windowSeconds ending now in steps of
// stepSeconds (domain.NewCapacityWindow bounds both), with the pool's
// capacity and every plan's limit and floor as set now; every plan has
// its series, zeros where nothing ran. Admin only.
func (c *Capacity) Series(ctx context.Context, a domain.Actor, windowSeconds, stepSeconds int) (domain.Capacity, error) {
	if err := requireAdmin(a); err != nil {
		return domain.Capacity{}, err
	}
	w, err := domain.NewCapacityWindow(c.now(), windowSeconds, stepSeconds)
	if err != nil {
		return domain.Capacity{}, err
	}
	out, err := c.series.Capacity(ctx, w)
	if err != nil {
		return domain.Capacity{}, err
	}
	pool, err := c.plans.Pool(ctx)
	if err != nil {
		return domain.Capacity{}, err
	}
	out.Pool.Capacity = pool.Capacity
	limits, err := c.plans.ListPlans(ctx)
	if err != nil {
		return domain.Capacity{}, err
	}
	plans := make([]domain.PlanCapacity, 0, len(limits))
	for _, l := range limits {
		p := domain.PlanCapacity{Plan: l.Plan, Running: make([]int, w.Points), Starts: make([]int, w.Points),
			WaitP50: make([]*time.Duration, w.Points), WaitP99: make([]*time.Duration, w.Points)}
		if i := slices.IndexFunc(out.Plans, func(s domain.PlanCapacity) bool { return s.Plan == l.Plan }); i >= 0 {
			p = out.Plans[i]
		}
		p.Limit, p.Floor = l.MaxRunning, domain.FloorInForce(l.Floor, l.MaxRunning)
		plans = append(plans, p)
	}
	out.Plans = plans
	return out, nil
}
