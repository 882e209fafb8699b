package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// QueueStatus is the state of a queue item. The diagram below is the whole
// state machine, and each edge has exactly one home: the set-based edges
// that move whole batches or every item of a workspace are SQL statements
// (named in brackets), every other edge is a QueueState method that app
// applies and whose result the store writes guarded by the state it was
// computed from.
//
//	PENDING    --claim [QueueMarkClaimed]-->                 CLAIMED
//	CLAIMED    --mark dispatched [QueueMarkDispatched]-->    DISPATCHED
//	CLAIMED    --run admitted [QueueAdmitRun]-->             DISPATCHED
//	CLAIMED    --ReleaseAfterDispatchError-->                PENDING, or FAILED on the last allowed attempt
//	CLAIMED    --ReleaseUnstarted-->                         PENDING
//	PENDING    --Fail-->                                     FAILED
//	PENDING    --workspace gone [QueueFailPendingOfWorkspaces]--> FAILED
//	PENDING, CLAIMED --Cancel-->                             CANCELLED
//	CLAIMED, DISPATCHED --RecordOutcome(FAILED|CANCELLED)--> FAILED | CANCELLED
//	CLAIMED, DISPATCHED --execution COMPLETED [QueueDeleteByExecution]--> deleted
//
// Each claim runs under an execution id of its own, and a release
// (ReleaseAfterDispatchError, ReleaseUnstarted) takes it off
// the item with its execution row. A workflow whose start was judged not
// to have happened, but which lands after the release, is refused by its
// admission [QueueAdmitRun], so it can neither run nor end the item.
//
// ClaimedAt is set exactly while an item is CLAIMED (the table's CHECK
// says the same), so every edge out of CLAIMED clears it.
type QueueStatus string

const (
	// QueuePending means the item waits to be claimed by a dispatcher poll.
	QueuePending QueueStatus = "PENDING"
	// QueueClaimed means one dispatcher owns the item and is deciding or
	// dispatching it; stale recovery returns it to PENDING if that dispatcher
	// dies.
	QueueClaimed QueueStatus = "CLAIMED"
	// QueueDispatched means the execution was started in Temporal; the item
	// stays until the execution ends.
	QueueDispatched QueueStatus = "DISPATCHED"
	// QueueFailed is terminal: the item will never (again) be dispatched.
	// LastError says why.
	QueueFailed QueueStatus = "FAILED"
	// QueueCancelled is terminal: the item was withdrawn on request, or its
	// execution was cancelled.
	QueueCancelled QueueStatus = "CANCELLED"
)

// QueueStatuses lists every queue status, for API enums and tests.
func QueueStatuses() []QueueStatus {
	return []QueueStatus{QueuePending, QueueClaimed, QueueDispatched, QueueFailed, QueueCancelled}
}

// ErrUnknownStatus is wrapped by ParseQueueStatus when a status is not one
// the domain knows, so a corrupt row is reported distinctly from other
// errors.
var ErrUnknownStatus = errors.New("unknown status")

// ParseQueueStatus turns a stored status into a QueueStatus, wrapping
// ErrUnknownStatus for anything else so a corrupt row is not treated as a
// state.
func ParseQueueStatus(s string) (QueueStatus, error) {
	for _, st := range QueueStatuses() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w: queue status %q", ErrUnknownStatus, s)
}

// Terminal reports whether no transition leaves s (FAILED, CANCELLED).
func (s QueueStatus) Terminal() bool {
	return s == QueueFailed || s == QueueCancelled
}

// MaxDispatchAttempts is how many dispatch errors an item may have before it
// fails for good. Only QueueState.DispatchFailures is compared with it; releases
// for capacity or stale recovery never count, so a busy workspace delays its
// items without failing them.
const MaxDispatchAttempts = 3

// Event names used in TransitionError.Event. They name the QueueState methods,
// so an error message points at the call that was refused.
const (
	// EventReleaseAfterDispatchError names QueueState.ReleaseAfterDispatchError.
	EventReleaseAfterDispatchError = "release after dispatch error"
	// EventReleaseUnstarted names QueueState.ReleaseUnstarted.
	EventReleaseUnstarted = "release unstarted"
	// EventFail names QueueState.Fail.
	EventFail = "fail"
	// EventCancel names QueueState.Cancel.
	EventCancel = "cancel"
	// EventRecordOutcome names QueueState.RecordOutcome; the error's Event adds
	// the outcome, e.g. "record outcome COMPLETED".
	EventRecordOutcome = "record outcome"
)

var (
	// ErrIllegalTransition is wrapped by every refused transition (always a
	// *TransitionError), so callers can treat "the item moved on meanwhile"
	// as one case with errors.Is.
	ErrIllegalTransition = errors.New("illegal queue transition")
)

// TransitionError reports a transition that the item's current state does not
// allow. It wraps ErrIllegalTransition.
type TransitionError struct {
	// From is the state the item was in; it did not change.
	From QueueStatus
	// Event names the refused transition (one of the Event* constants, with
	// the outcome appended for EventRecordOutcome).
	Event string
}

// Error describes the refused transition, e.g. "queue item: cannot claim from
// DISPATCHED".
func (e *TransitionError) Error() string {
	return fmt.Sprintf("queue item: cannot %s from %s", e.Event, e.From)
}

// Unwrap returns ErrIllegalTransition so errors.Is works on every refusal.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// QueueState is the state of one requested execution in the dispatch queue.
// The fields are exported so adapters can load and store them; change them
// only through the methods, which enforce the state machine documented on
// QueueStatus. A method that returns an error leaves the item unchanged.
type QueueState struct {
	// Status is the current state.
	Status QueueStatus
	// ClaimedAt is when the current claim was taken, set only while
	// CLAIMED. Stale recovery compares it to recognise the claim it
	// observed.
	ClaimedAt *time.Time
	// DispatchedAt is when the execution was started in Temporal.
	DispatchedAt *time.Time
	// AvailableAt is the earliest time the item may be claimed (again). It
	// implements the backoff after a dispatch error.
	AvailableAt time.Time
	// AttemptCount counts every release back to PENDING (at capacity, after a
	// dispatch error, by stale recovery) and the final failed dispatch. It is
	// for observability only: it never fails an item.
	AttemptCount int
	// DispatchFailures counts dispatch errors only. It alone is compared with
	// MaxDispatchAttempts, because waiting for capacity is not a failure.
	DispatchFailures int
	// LastError is the most recent failure reason. Releases keep it, so a user
	// can see why an item that is PENDING again had to wait.
	LastError string
}

// Validate checks the invariants the methods maintain, so an adapter can
// reject a corrupt row on load instead of applying rules to it.
func (q QueueState) Validate() error {
	var errs []error
	if _, err := ParseQueueStatus(string(q.Status)); err != nil {
		errs = append(errs, err)
	}
	if (q.Status == QueueClaimed) != (q.ClaimedAt != nil) {
		errs = append(errs, errors.New("queue item: ClaimedAt set outside CLAIMED, or CLAIMED without it"))
	}
	if q.Status == QueueDispatched && q.DispatchedAt == nil {
		errs = append(errs, errors.New("queue item: DISPATCHED without DispatchedAt"))
	}
	if q.AttemptCount < 0 || q.DispatchFailures < 0 {
		errs = append(errs, errors.New("queue item: negative counter"))
	}
	if q.DispatchFailures > q.AttemptCount {
		errs = append(errs, fmt.Errorf("queue item: %d dispatch failures but only %d attempts", q.DispatchFailures, q.AttemptCount))
	}
	return errors.Join(errs...)
}

// refuse builds the error for an illegal transition from the current state.
func (q *QueueState) refuse(event string) error {
	return &TransitionError{From: q.Status, Event: event}
}

// ReleaseAfterDispatchError handles a failed dispatch (Temporal unreachable,
// execution row could not be written...) of a CLAIMED item. It counts the
// attempt and the dispatch failure and records reason. If DispatchFailures has
// now reached MaxDispatchAttempts the item becomes FAILED for good;
// otherwise it returns to PENDING, not claimable before now + b.Delay(DispatchFailures), so that a
// struggling Temporal is not hammered at every poll.
func (q *QueueState) ReleaseAfterDispatchError(reason string, now time.Time, b DispatchBackoff) error {
	if q.Status != QueueClaimed {
		return q.refuse(EventReleaseAfterDispatchError)
	}
	q.AttemptCount++
	q.DispatchFailures++
	q.LastError = reason
	q.ClaimedAt = nil
	if q.DispatchFailures >= MaxDispatchAttempts {
		q.Status = QueueFailed
		return nil
	}
	q.Status = QueuePending
	q.AvailableAt = now.Add(b.Delay(q.DispatchFailures))
	return nil
}

// ReleaseUnstarted returns a CLAIMED item to PENDING when its workflow is
// known not to have started: its start was in doubt (the workflow engine
// was unavailable, or the dispatcher that claimed it lost its lease or
// stopped) and the engine has never seen it. None of that says anything
// about the item, so the attempt counts but no dispatch failure does, and
// the item is claimable again at once. reason becomes LastError, so a user can see why the
// item waited.
func (q *QueueState) ReleaseUnstarted(reason string) error {
	if q.Status != QueueClaimed {
		return q.refuse(EventReleaseUnstarted)
	}
	q.Status = QueuePending
	q.ClaimedAt = nil
	q.AttemptCount++
	q.LastError = reason
	return nil
}

// Fail ends a PENDING item that can never be dispatched: its definition or
// version is gone, or its execution cannot be written. An item that has
// been claimed ends through its release or its outcome instead, so that a
// started workflow is never forgotten.
func (q *QueueState) Fail(reason string) error {
	if q.Status != QueuePending {
		return q.refuse(EventFail)
	}
	q.Status = QueueFailed
	q.ClaimedAt = nil
	q.LastError = reason
	return nil
}

// Cancel withdraws an item that has not been dispatched yet. A DISPATCHED item
// cannot be cancelled here: its execution must be cancelled in Temporal, and
// RecordOutcome records the result.
func (q *QueueState) Cancel() error {
	if q.Status != QueuePending && q.Status != QueueClaimed {
		return q.refuse(EventCancel)
	}
	q.Status = QueueCancelled
	q.ClaimedAt = nil
	return nil
}

// RecordOutcome records that the item's execution ended FAILED or
// CANCELLED, with reason as LastError, so the queue shows why the request
// did not succeed. The item may still be CLAIMED: a short run can end
// before its dispatcher marks it DISPATCHED. A COMPLETED execution is not a
// transition (its item is deleted), and RUNNING is not an end; both are
// refused like any other illegal transition.
func (q *QueueState) RecordOutcome(status ExecutionStatus, reason string) error {
	event := EventRecordOutcome + " " + string(status)
	if q.Status != QueueDispatched && q.Status != QueueClaimed {
		return q.refuse(event)
	}
	switch status {
	case ExecutionFailed:
		q.Status = QueueFailed
	case ExecutionCancelled:
		q.Status = QueueCancelled
	default:
		return q.refuse(event)
	}
	q.ClaimedAt = nil
	q.LastError = reason
	return nil
}

// DispatchBackoff spaces out the retries of an item whose dispatch failed.
// Base should be at least the dispatcher's poll interval; a shorter delay has
// no effect because the item is only looked at once per poll.
type DispatchBackoff struct {
	// Base is the delay after the first failure.
	Base time.Duration
	// Max caps the delay; 0 means no cap.
	Max time.Duration
}

// Delay returns how long an item waits after its failures-th dispatch error:
// Base*2^(failures-1), capped at Max (when Max > 0). It is 0 for failures < 1
// or Base <= 0, and never overflows.
func (b DispatchBackoff) Delay(failures int) time.Duration {
	if failures < 1 || b.Base <= 0 {
		return 0
	}
	limit := time.Duration(math.MaxInt64)
	if b.Max > 0 {
		limit = b.Max
	}
	d := b.Base
	for i := 1; i < failures && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// QueueItem is one requested execution waiting in, or passing through, the
// dispatch queue: its identity and payload around the QueueState that the
// state machine governs.
type QueueItem struct {
	// ID names the item; the enqueue answer returns it.
	ID ID
	// WorkspaceID is the workspace whose limit admits the item.
	WorkspaceID ID
	// DefinitionID names the definition to run, at the version
	// RunsVersion chooses.
	DefinitionID ID
	// Input is the JSON the caller enqueued, kept byte for byte.
	Input json.RawMessage
	// Priority orders a workspace's items: the lowest number (1, the most
	// urgent) is claimed first, then the oldest.
	Priority int
	// CreatedAt is when the item was enqueued.
	CreatedAt time.Time
	// RetryOf is the execution the item retries from its failed nodes
	// (Executions.Retry); nil for an ordinary enqueue.
	RetryOf *ID
	// PinnedVersion is the version of the execution a retry retries, 0
	// for none: the version the item runs (RunsVersion).
	PinnedVersion int
	// RunTimeout is the enqueue's own run deadline, 0 for none; the
	// version's runTimeout applies too, the shorter winning.
	RunTimeout time.Duration
	// ExecutionID is set by the claim that writes the item's execution and
	// kept through a failed dispatch, so the retry starts the same
	// execution.
	ExecutionID *ID
	// ConcurrencyKey is the key resolved at enqueue, "" for none (see
	// Concurrency).
	ConcurrencyKey string
	// ConcurrencyLimit is its key's limit, as declared at enqueue.
	ConcurrencyLimit int
	// ConcurrencyRate is its key's start rate, as declared at enqueue;
	// nil for none.
	ConcurrencyRate *StartRate
	// ScheduleID names the schedule that fired the item; nil otherwise.
	ScheduleID *ID
	// ScheduleTick is the schedule's tick the item is for.
	ScheduleTick *time.Time
	// QueueState is the part the state machine moves.
	QueueState
}

// RunsVersion is the definition version the item's execution runs, given
// the definition's current version: a retry's pinned version, so that the
// nodes it runs again are those of the graph whose outputs it reuses, and
// the current one for any other item (whatever was current at its claim).
func (q QueueItem) RunsVersion(current int) int {
	if q.PinnedVersion > 0 {
		return q.PinnedVersion
	}
	return current
}

// VersionToRun is the definition version q's execution runs (RunsVersion),
// given the definition's current version (0 when the definition is gone)
// and found, which says whether a version of it is stored. When that
// version cannot be run, reason says why, for the item's failure: the
// claim fails such an item rather than wait, since nothing brings a
// deleted definition or version back.
func (q QueueItem) VersionToRun(current int, found func(version int) bool) (version int, reason string) {
	version = q.RunsVersion(current)
	switch {
	case current == 0:
		return version, "workflow definition not found: it was deleted after the item was enqueued"
	case found(version):
		return version, ""
	case q.PinnedVersion > 0:
		return version, fmt.Sprintf("workflow definition version %d, which this retry runs, not found: it was deleted after the item was enqueued", version)
	default:
		return version, fmt.Sprintf("workflow definition version %d not found", version)
	}
}
