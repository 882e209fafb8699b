package httpapi

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/domain"
)

// GetCapacity serves the capacity page's series; absent parameters take
// the spec's defaults, the last hour in steps of a minute.
func (s *Server) GetCapacity(ctx context.Context, req api.GetCapacityRequestObject) (api.GetCapacityResponseObject, error) {
	window, step := 3600, 60
	if req.Params.WindowSeconds != nil {
		window = *req.Params.WindowSeconds
	}
	if req.Params.StepSeconds != nil {
		step = *req.Params.StepSeconds
	}
	c, err := s.app.Capacity.Series(ctx, actorFrom(ctx), window, step)
	if err != nil {
		return nil, err
	}
	return api.GetCapacity200JSONResponse(capacityOut(c)), nil
}

func capacityOut(c domain.Capacity) api.Capacity {
	out := api.Capacity{
		From: c.Window.From, To: c.Window.To, StepSeconds: int(c.Window.Step / time.Second),
		Pool:  api.PoolUse{WithinFloor: c.Pool.WithinFloor, Borrowed: c.Pool.Borrowed, CapacityChanges: []api.PoolCapacityChange{}},
		Plans: make([]api.PlanUse, len(c.Plans)),
	}
	// The figures set now are the last step's: it ends after now, and no
	// edit is later than now.
	for i, capacity := range c.Pool.Capacity {
		if i == 0 || !equalPtr(capacity, c.Pool.Capacity[i-1]) {
			out.Pool.CapacityChanges = append(out.Pool.CapacityChanges, api.PoolCapacityChange{Step: i, Capacity: capacity})
		}
		out.Pool.Capacity = capacity
	}
	// A step without a start has no wait: 0, which its starts explain.
	seconds := func(ds []*time.Duration) []float32 {
		out := make([]float32, len(ds))
		for i, d := range ds {
			if d != nil {
				out[i] = float32(d.Seconds())
			}
		}
		return out
	}
	for i, p := range c.Plans {
		u := api.PlanUse{Plan: api.Plan(p.Plan), Running: p.Running, Starts: p.Starts,
			WaitP50Seconds: seconds(p.WaitP50), WaitP99Seconds: seconds(p.WaitP99), LimitChanges: []api.PlanLimitsChange{}}
		for k := range p.Limit {
			if k == 0 || p.Limit[k] != p.Limit[k-1] || p.Floor[k] != p.Floor[k-1] {
				u.LimitChanges = append(u.LimitChanges, api.PlanLimitsChange{Step: k, MaxRunning: p.Limit[k], Floor: p.Floor[k]})
			}
			u.MaxRunning, u.Floor = p.Limit[k], p.Floor[k]
		}
		out.Plans[i] = u
	}
	return out
}

// equalPtr is whether a and b are both nil or point to equal values.
func equalPtr(a, b *int) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
