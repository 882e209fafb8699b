package domain

import "time"

// WaitReason names what holds a PENDING item back. The set is closed, so
// it can label a metric.
type WaitReason string

const (
	// WaitWorkspaceLimit is a workspace running as many executions as its
	// limit allows.
	WaitWorkspaceLimit WaitReason = "WORKSPACE_LIMIT"
	// WaitKeyLimit is the item's concurrency key running as many
	// executions as its limit allows.
	WaitKeyLimit WaitReason = "KEY_LIMIT"
	// WaitBackOff is an item a failed start released, which may be
	// claimed again from AvailableAt.
	WaitBackOff WaitReason = "BACK_OFF"
	// WaitNotBefore is an item enqueued with a notBefore still ahead (a
	// delayed start, never attempted), claimable from AvailableAt.
	WaitNotBefore WaitReason = "NOT_BEFORE"
	// WaitStartRate is the item's workspace or concurrency key having
	// started as many executions as its start rate allows for now; it may
	// go from Until.
	WaitStartRate WaitReason = "START_RATE"
	// WaitPoolFull is the pool every workspace shares running as many
	// executions as its capacity (see Pool).
	WaitPoolFull WaitReason = "POOL_FULL"
	// WaitFloorOwners is a workspace at or above its floor (a borrower)
	// while the pool's free slots are held for workspaces below theirs
	// with an item due.
	WaitFloorOwners WaitReason = "FLOOR_OWNERS"
)

// Waiting says what holds an item back, with the figure: the limit and
// what runs under it, or until when it backs off.
type Waiting struct {
	// Reason is what holds the item.
	Reason WaitReason
	// Limit is the limit that is full (workspace or key), or the pool's
	// capacity, for WaitPoolFull and WaitFloorOwners.
	Limit int
	// Running is what runs under it (in the whole pool, for WaitPoolFull
	// and WaitFloorOwners).
	Running int
	// Reserved are the pool's free slots held for workspaces below their
	// floor, for WaitFloorOwners.
	Reserved int
	// Key is the full concurrency key, for WaitKeyLimit.
	Key string
	// Until is when a back-off ends, for WaitBackOff, when a delayed
	// start comes, for WaitNotBefore, or when the rate next lets a start
	// go, for WaitStartRate.
	Until *time.Time
	// Rate is the start rate that holds the item, for WaitStartRate.
	Rate *StartRate
}

// WaitFigures are what an item's wait is decided from, read together: its
// workspace's limit, RUNNING count and start-rate bucket, and the RUNNING
// count and bucket of each concurrency key asked for. They are the figures
// the claim decides from (AdmissionFigures), read now.
type WaitFigures struct {
	// WorkspaceLimit is the workspace's limit in force.
	WorkspaceLimit int
	// WorkspaceRunning counts its RUNNING executions.
	WorkspaceRunning int
	// WorkspaceFloor is its floor in the pool.
	WorkspaceFloor int
	// Pool is the pool's figures, the workspace's own floor's deficit not
	// among the slots Reserved.
	Pool PoolFigures
	// KeyRunning counts RUNNING executions per concurrency key.
	KeyRunning map[string]int
	// WorkspaceRate is the workspace's bucket, nil for no start rate.
	WorkspaceRate *RateBucket
	// KeyTAT is, per concurrency key, its bucket's theoretical arrival
	// time (zero at rest); the rate is the item's own, ConcurrencyRate.
	KeyTAT map[string]time.Time
}

// WaitingOn says what holds q back now, nil when nothing does (it is
// next in line, or not PENDING): Verdict, on q's figures.
func (q QueueItem) WaitingOn(f WaitFigures, now time.Time) *Waiting {
	if q.Status != QueuePending {
		return nil
	}
	return Verdict(q.AdmissionFigures(f), now)
}

// AdmissionFigures are q's own figures (when it may go, its key, limit and
// rate) with its workspace's and key's from f.
func (q QueueItem) AdmissionFigures(f WaitFigures) AdmissionFigures {
	a := AdmissionFigures{
		AvailableAt: q.AvailableAt, Attempted: q.AttemptCount > 0,
		WorkspaceLimit: f.WorkspaceLimit, WorkspaceRunning: f.WorkspaceRunning, WorkspaceFloor: f.WorkspaceFloor, WorkspaceRate: f.WorkspaceRate, Pool: f.Pool,
		Key: q.ConcurrencyKey, KeyLimit: q.ConcurrencyLimit, KeyRunning: f.KeyRunning[q.ConcurrencyKey],
	}
	if q.ConcurrencyKey != "" && q.ConcurrencyRate != nil {
		a.KeyRate = &RateBucket{Rate: *q.ConcurrencyRate, TAT: f.KeyTAT[q.ConcurrencyKey]}
	}
	return a
}
