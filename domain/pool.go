package domain

import "time"

// Pool is the capacity every workspace shares: the RUNNING executions of
// all workspaces together, never exceeded however many are busy. Inside
// it each workspace has a floor (its plan's, or its own), admitted before
// any borrower, and a ceiling (its limit); what a workspace runs above
// its floor is borrowed, and borrowers share what is free by their plans'
// weights. A pool without a capacity (the default) admits each workspace
// up to its ceiling, floors and weights unused. Verdict decides by it;
// docs/admission.md says how.
type Pool struct {
	// Capacity is the pool's, nil for none.
	Capacity *int
	// Running counts the RUNNING executions of every workspace now.
	Running int
	// Borrowed counts those above their workspace's floor.
	Borrowed int
	// UpdatedAt is when the admin last changed the capacity.
	UpdatedAt time.Time
}

// PoolFigures are the pool's figures one admission decides from, read
// together under the pool's lock (a claim) or at one instant (WaitingOn).
type PoolFigures struct {
	// Bounded is true when the pool has a capacity; the other figures
	// count only then.
	Bounded bool
	// Capacity is the pool's.
	Capacity int
	// Running counts the RUNNING executions of every workspace, with the
	// starts a claim has already given.
	Running int
	// Reserved are the pool's slots held for other workspaces below their
	// floor with an item due: what a borrower may not take.
	Reserved int
}

// Free is how many more executions a pool with a capacity lets start,
// whoever starts them.
func (p PoolFigures) Free() int {
	return max(0, p.Capacity-p.Running)
}

// Lendable is how many of the free slots of a pool with a capacity a
// borrower may take: those no one below their floor is waiting for.
func (p PoolFigures) Lendable() int {
	return max(0, p.Capacity-p.Running-p.Reserved)
}

// FloorInForce is a workspace's floor as admission uses it: never above
// its limit (a ceiling lowered under a floor set before wins). SQL that
// sums floors over many workspaces repeats it as floor_in_force
// (migration 00047), held to it by a test.
func FloorInForce(floor, limit int) int {
	return max(0, min(floor, limit))
}

// CheckFloor refuses a floor above the ceiling it sits under, or above
// the pool's capacity (nil: none), naming field: a guarantee no
// workspace could ever reach would only hold capacity back from others.
func CheckFloor(floor, ceiling int, capacity *int, field string) error {
	e := &ValidationError{}
	switch {
	case floor > ceiling:
		e.add(field, "a floor of %d is above the limit of %d it sits under (maxRunning)", floor, ceiling)
	case capacity != nil && floor > *capacity:
		e.add(field, "a floor of %d is above the pool's capacity of %d", floor, *capacity)
	}
	return e.errOrNil()
}
