package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

var _ ports.CapacityStore = (*Store)(nil)

// capacityLookback is how long before a window's start a run may have
// started and still be counted running inside it: the admitted index is
// read from there, so a run longer than this that ended inside the window
// is left out (docs/console.md#capacity).
const capacityLookback = time.Hour

// Capacity reads the window's series in three statements: the limits in
// force at each step, the runs split by them, and the waits.
func (s *Store) Capacity(ctx context.Context, w domain.CapacityWindow) (domain.Capacity, error) {
	stepSeconds := int32(w.Step / time.Second)
	limits, err := s.q.CapacityLimits(ctx, s.pool, dbsqlc.CapacityLimitsParams{FromAt: w.From, StepSeconds: stepSeconds, Points: int32(w.Points)})
	if err != nil {
		return domain.Capacity{}, err
	}
	running, err := s.q.CapacityRunning(ctx, s.pool, dbsqlc.CapacityRunningParams{
		FromAt: w.From, StepSeconds: stepSeconds, Points: int32(w.Points), Since: w.From.Add(-capacityLookback),
	})
	if err != nil {
		return domain.Capacity{}, err
	}
	waits, err := s.q.CapacityWaits(ctx, s.pool, dbsqlc.CapacityWaitsParams{FromAt: w.From, StepSeconds: stepSeconds, ToAt: w.To})
	if err != nil {
		return domain.Capacity{}, err
	}
	out := domain.Capacity{Window: w, Pool: domain.PoolCapacity{
		Capacity: make([]*int, w.Points), WithinFloor: make([]int, w.Points), Borrowed: make([]int, w.Points),
	}}
	byPlan := map[domain.Plan]int{}
	plan := func(name string) *domain.PlanCapacity {
		p := domain.Plan(name)
		i, ok := byPlan[p]
		if !ok {
			i = len(out.Plans)
			byPlan[p] = i
			out.Plans = append(out.Plans, domain.PlanCapacity{Plan: p, Running: make([]int, w.Points), Starts: make([]int, w.Points),
				WaitP50: make([]*time.Duration, w.Points), WaitP99: make([]*time.Duration, w.Points),
				Limit: make([]int, w.Points), Floor: make([]int, w.Points)})
		}
		return &out.Plans[i]
	}
	for _, r := range limits {
		if r.Step < 0 || int(r.Step) >= w.Points {
			continue
		}
		p := plan(r.Plan)
		p.Limit[r.Step], p.Floor[r.Step] = int(r.MaxRunning), domain.FloorInForce(int(r.Floor), int(r.MaxRunning))
		out.Pool.Capacity[r.Step] = intPtr(r.PoolCapacity)
	}
	for _, r := range running {
		if r.Step < 0 || int(r.Step) >= w.Points {
			continue
		}
		plan(r.Plan).Running[r.Step] += int(r.Running)
		out.Pool.WithinFloor[r.Step] += int(r.WithinFloor)
		out.Pool.Borrowed[r.Step] += int(r.Running - r.WithinFloor)
	}
	ms := func(v float64) *time.Duration {
		d := time.Duration(v * float64(time.Millisecond))
		return &d
	}
	for _, r := range waits {
		if r.Step < 0 || int(r.Step) >= w.Points {
			continue
		}
		p := plan(r.Plan)
		p.Starts[r.Step] = int(r.Starts)
		p.WaitP50[r.Step], p.WaitP99[r.Step] = ms(r.P50Ms), ms(r.P99Ms)
	}
	order := domain.Plans()
	slices.SortStableFunc(out.Plans, func(a, b domain.PlanCapacity) int {
		return slices.Index(order, a.Plan) - slices.Index(order, b.Plan)
	})
	return out, nil
}
