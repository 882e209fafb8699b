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
		Pool:  api.PoolUse{Capacity: c.Pool.Capacity, WithinFloor: c.Pool.WithinFloor, Borrowed: c.Pool.Borrowed},
		Plans: make([]api.PlanUse, len(c.Plans)),
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
		out.Plans[i] = api.PlanUse{Plan: api.Plan(p.Plan), MaxRunning: p.Limit, Floor: p.Floor, Running: p.Running, Starts: p.Starts,
			WaitP50Seconds: seconds(p.WaitP50), WaitP99Seconds: seconds(p.WaitP99)}
	}
	return out
}
