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
)

// Waiting says what holds an item back, with the figure: the limit and
// what runs under it, or until when it backs off.
type Waiting struct {
	// Reason is what holds the item.
	Reason WaitReason
	// Limit is the limit that is full (workspace or key).
	Limit int
	// Running is what runs under it.
	Running int
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
// workspace's limit and RUNNING count, and the RUNNING count of each
// concurrency key asked for.
type WaitFigures struct {
	// WorkspaceLimit is the workspace's limit in force.
	WorkspaceLimit int
	// WorkspaceRunning counts its RUNNING executions.
	WorkspaceRunning int
	// KeyRunning counts RUNNING executions per concurrency key.
	KeyRunning map[string]int
	// WorkspaceRate is the workspace's start rate in force, nil for none.
	WorkspaceRate *StartRate
	// WorkspaceRateNext is when the workspace's bucket next lets a start
	// go.
	WorkspaceRateNext time.Time
	// KeyRateNext is, per concurrency key, when its bucket next lets a
	// start go (the rate is the item's own, ConcurrencyRate).
	KeyRateNext map[string]time.Time
}

// WaitingOn says what holds q back now, nil when nothing does (it is
// next in line, or not PENDING). A time ahead is said first, since it holds
// the item whatever room there is: a back-off once an attempt failed, its
// notBefore before any; then a full workspace; then the workspace's start
// rate; then a full key; then the key's start rate.
// It is the same rule the claim applies (FreeSlots), read for display.
func (q QueueItem) WaitingOn(f WaitFigures, now time.Time) *Waiting {
	if q.Status != QueuePending {
		return nil
	}
	if q.AvailableAt.After(now) {
		until := q.AvailableAt
		if q.AttemptCount > 0 {
			return &Waiting{Reason: WaitBackOff, Until: &until}
		}
		return &Waiting{Reason: WaitNotBefore, Until: &until}
	}
	if FreeSlots(f.WorkspaceLimit, f.WorkspaceRunning) == 0 {
		return &Waiting{Reason: WaitWorkspaceLimit, Limit: f.WorkspaceLimit, Running: f.WorkspaceRunning}
	}
	if f.WorkspaceRate != nil && f.WorkspaceRateNext.After(now) {
		until := f.WorkspaceRateNext
		return &Waiting{Reason: WaitStartRate, Rate: f.WorkspaceRate, Until: &until}
	}
	if q.ConcurrencyKey != "" {
		if running := f.KeyRunning[q.ConcurrencyKey]; FreeSlots(q.ConcurrencyLimit, running) == 0 {
			return &Waiting{Reason: WaitKeyLimit, Limit: q.ConcurrencyLimit, Running: running, Key: q.ConcurrencyKey}
		}
		if next := f.KeyRateNext[q.ConcurrencyKey]; q.ConcurrencyRate != nil && next.After(now) {
			return &Waiting{Reason: WaitStartRate, Rate: q.ConcurrencyRate, Key: q.ConcurrencyKey, Until: &next}
		}
	}
	return nil
}
