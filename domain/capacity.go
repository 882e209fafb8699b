package domain

import "time"

// The bounds of a capacity series' window and step, in seconds: at most
// the last hour, in steps of 10 s to 10 min, so a series has at most 360
// points and its reads cover at most an hour of starts.
var (
	// CapacityWindowBound bounds how far back a capacity series reaches.
	CapacityWindowBound = QuotaBound{Name: "windowSeconds", Min: 60, Max: 3600}
	// CapacityStepBound bounds the time between its points.
	CapacityStepBound = QuotaBound{Name: "stepSeconds", Min: 10, Max: 600}
)

// CapacityReach is how far back from now any capacity series reads: its
// longest window. The admission limits' history is kept for it.
func CapacityReach() time.Duration {
	return time.Duration(CapacityWindowBound.Max) * time.Second
}

// CapacityWindow is the span a capacity series covers, in Points steps
// of Step.
type CapacityWindow struct {
	// From is the start of the first step.
	From time.Time
	// To is the end of the last step: the end of the step now is in.
	To time.Time
	// Step is the time between points.
	Step time.Duration
	// Points is how many steps the window has.
	Points int
}

// NewCapacityWindow is the window of windowSeconds ending at to, in steps
// of stepSeconds, refused as a ValidationError naming the field when a
// figure is out of its bound or the step is longer than the window.
func NewCapacityWindow(to time.Time, windowSeconds, stepSeconds int) (CapacityWindow, error) {
	e := &ValidationError{}
	for _, c := range []struct {
		b QuotaBound
		v int
	}{{CapacityWindowBound, windowSeconds}, {CapacityStepBound, stepSeconds}} {
		if c.v < c.b.Min || c.v > c.b.Max {
			e.add(c.b.Name, "must be from %d to %d, got %d", c.b.Min, c.b.Max, c.v)
		}
	}
	if len(e.Problems) == 0 && stepSeconds > windowSeconds {
		e.add(CapacityStepBound.Name, "must be at most windowSeconds (%d), got %d", windowSeconds, stepSeconds)
	}
	if err := e.errOrNil(); err != nil {
		return CapacityWindow{}, err
	}
	points := windowSeconds / stepSeconds
	step := time.Duration(stepSeconds) * time.Second
	to = to.Truncate(step).Add(step)
	return CapacityWindow{From: to.Add(-time.Duration(points) * step), To: to, Step: step, Points: points}, nil
}

// PlanCapacity is one plan's series over a window, a value per step.
type PlanCapacity struct {
	// Plan is the plan.
	Plan Plan
	// Running counts the RUNNING executions of the workspaces on the
	// plan at the step's end (a workspace moved counts in the plan it was
	// on then).
	Running []int
	// Starts counts the runs started in the step by workspaces on the
	// plan when they started.
	Starts []int
	// WaitP50 is the median admission wait of those runs, nil in a step
	// without one.
	WaitP50 []*time.Duration
	// WaitP99 is their 99th percentile, nil in a step without one.
	WaitP99 []*time.Duration
	// Limit is the plan's limit per workspace at the step's end, as it
	// stood then; the last step's is the limit set now.
	Limit []int
	// Floor is the plan's floor per workspace at the step's end as
	// admission used it (FloorInForce), as it stood then.
	Floor []int
}

// PoolCapacity is the pool's series over a window, a value per step.
type PoolCapacity struct {
	// Capacity is the pool's at the step's end, as it stood then, nil
	// for none; the last step's is the capacity set now.
	Capacity []*int
	// WithinFloor counts the RUNNING executions within their workspaces'
	// floors, as they stood, at the step's end.
	WithinFloor []int
	// Borrowed counts those above their workspaces' floors.
	Borrowed []int
}

// Capacity is the capacity page's picture: the pool's use and each
// plan's running executions and admission waits over one window.
type Capacity struct {
	// Window is the span the series cover.
	Window CapacityWindow
	// Pool is the pool's series.
	Pool PoolCapacity
	// Plans are every plan's series.
	Plans []PlanCapacity
}
