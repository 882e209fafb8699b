package postgres

import (
	"context"
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

// Capacity reads the window's series in two statements.
func (s *Store) Capacity(ctx context.Context, w domain.CapacityWindow) (domain.Capacity, error) {
	stepSeconds := int32(w.Step / time.Second)
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
	out := domain.Capacity{Window: w, Pool: domain.PoolCapacity{WithinFloor: make([]int, w.Points), Borrowed: make([]int, w.Points)}}
	byPlan := map[domain.Plan]int{}
	plan := func(name string) *domain.PlanCapacity {
		p := domain.Plan(name)
		i, ok := byPlan[p]
		if !ok {
			i = len(out.Plans)
			byPlan[p] = i
			out.Plans = append(out.Plans, domain.PlanCapacity{Plan: p, Running: make([]int, w.Points), Starts: make([]int, w.Points),
				WaitP50: make([]*time.Duration, w.Points), WaitP99: make([]*time.Duration, w.Points)})
		}
		return &out.Plans[i]
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
	return out, nil
}
