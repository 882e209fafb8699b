package ports

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// ClaimableWorkspace is a workspace with claimable work, as the admission
// step sees it under the workspace's row lock.
type ClaimableWorkspace struct {
	ID   domain.ID
	Plan domain.Plan
	// Running is the workspace's RUNNING executions, counted under the
	// lock.
	Running int
	// Limit is the RUNNING executions it may have, read in the claim's
	// transaction: its own limit, else its plan's. It is the workspace's
	// ceiling in the pool.
	Limit int
	// Floor is its floor in the pool (its own, else its plan's) and
	// Weight its plan's weight, read with Limit; they count only when the
	// pool has a capacity (domain.Pool).
	Floor  int
	Weight int
	// Rate is the workspace's start-rate bucket as read under the lock,
	// nil for no start rate.
	Rate *domain.RateBucket
	// Rated is true when the workspace has a start rate; RateRoom is then
	// how many starts its bucket allows now. The planner fills them from
	// Rate at the claim's now (domain.RateBucket.Room); the store leaves
	// them unset.
	Rated    bool
	RateRoom int
	// Known is true once the claim has read the workspace's admissible
	// items; Admissible is then how many more of them may start now
	// (domain.ChooseKeyed within its free slots and rates), the items
	// held by their key's limit or rate, a notBefore or a back-off left
	// out.
	Known      bool
	Admissible int
}

// Room is how many items w can start now by what the claim knows of it:
// its free slots (domain.FreeSlots), within its start rate's room when it
// has one, within its admissible items once they are known.
func (w ClaimableWorkspace) Room() int {
	n := domain.FreeSlots(w.Limit, w.Running)
	if w.Rated {
		n = min(n, w.RateRoom)
	}
	if w.Known {
		n = min(n, w.Admissible)
	}
	return max(n, 0)
}

// AdmitFunc deals a claim's quotas: how many items to claim from each
// workspace, budget in all. Returning a quota above what a workspace can
// start now (Room) would break its limit or waste the batch. The
// dispatcher's planner calls it in the claim's phases: once with what the
// counts and rates say, and once more, with Known set, for what the first
// quotas left unused because a workspace's items were held.
type AdmitFunc func(workspaces []ClaimableWorkspace, budget int) map[domain.ID]int

// WindowReader reads, under the claim's locks and in one statement, the
// admissible items of each workspace given a count in n: a window of
// about four items per count (so keys can take turns), in claim order,
// each with its key's figures (domain.KeyedCandidate). Items due later,
// and items whose key is at its limit or over its start rate as the walk
// counts them, are passed over: that is a prefilter, for speed (the
// planner gives every item it reads its verdict, so an item the walk
// would pass over is held by it all the same), and what lets a window
// shorter than asked for hold every item of the workspace that may start
// now.
type WindowReader func(n map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error)

// ClaimPlan is what a claim's planner decided for the locked workspaces.
type ClaimPlan struct {
	// Chosen are the items to claim, by workspace in the order given.
	Chosen []domain.ID
	// More, AtCapacity, Refused and PassedOver are as ClaimResult's, for
	// the locked workspaces.
	More       bool
	AtCapacity int
	Refused    map[domain.Plan]int
	PassedOver map[domain.WaitReason]int
	// Decisions are, per workspace whose items were read, the verdicts
	// given to its items (domain.ChooseKeyed), in the order given.
	Decisions map[domain.ID][]domain.Decision
	// Version is the definition version a chosen item's execution runs,
	// from its definition's current version as the claim read it (0 when
	// the definition is gone) and found, which says whether a version of
	// it is stored; reason says why it can never run, "" when it can. The
	// store fails an item with a reason (through the claim's RejectFunc).
	Version func(item domain.QueueItem, current int, found func(version int) bool) (version int, reason string)
	// Started says, once the store has claimed what it could of Chosen
	// (claimed), what those starts did to the start-rate buckets the plan
	// read (RatesTaken). Nil writes nothing.
	Started func(claimed []ClaimedItem) RatesTaken
}

// RatesTaken is what a claim's starts did to the start-rate buckets its
// plan read, for the store to write.
type RatesTaken struct {
	// Writes are the buckets to write: those the claimed items took a
	// start from, and those a raised rate capped.
	Writes []RateBucketWrite
	// NextDue is how long until a workspace's rate next lets a start go,
	// 0 when none holds one back.
	NextDue time.Duration
	// RateAllowedAt is, per claimed execution that a start rate of its
	// own tenant held back after it was enqueued and due (its
	// workspace's, its key's), when the last of those rates let it go
	// (domain.RateBucket.AllowedSince): its admission wait is counted
	// from no earlier.
	RateAllowedAt map[domain.ID]time.Time
}

// RateBucketWrite is a start-rate bucket's new state, for the store to
// write: a workspace's (Key "") or one of its concurrency keys'.
type RateBucketWrite struct {
	// Workspace is the bucket's workspace.
	Workspace domain.ID
	// Key is its concurrency key, "" for the workspace's own bucket.
	Key string
	// TAT is its new theoretical arrival time.
	TAT time.Time
	// NextAt is when it next lets a start go (domain.RateBucket.NextStart),
	// stored so that SQL can pass over a key over its rate.
	NextAt time.Time
}

// PlanFunc plans a claim of up to budget items from the locked
// workspaces, reading their admissible items through read, at now (the
// store's clock, by which rates and due times are read), in the pool as
// the claim read it under its lock (its Running counting every
// workspace's RUNNING executions, its Reserved the slots held for the
// workspaces below their floor other than the locked ones). It is the one
// place that decides what a claim takes: each item by domain.Verdict. The
// store reads and writes.
type PlanFunc func(now time.Time, pool domain.PoolFigures, workspaces []ClaimableWorkspace, budget int, read WindowReader) (ClaimPlan, error)

// RejectFunc applies the domain's verdict to a PENDING item the claim
// found can never run (its definition or version is gone, or its
// execution row is refused), reason saying why. The store writes the
// state it leaves, guarded by the state the item was claimed in, in the
// claim's transaction.
type RejectFunc func(item *domain.QueueItem, reason string) error

// ClaimedItem is a queue item claimed for dispatch, with the execution row
// already written as RUNNING and its id on the item.
type ClaimedItem struct {
	domain.QueueItem
	ExecutionID domain.ID
	Version     int
	// Plan is the workspace's plan at admission; the workflow sizes its
	// nodes in flight by it.
	Plan domain.Plan
	// Graph is the definition version's graph as stored, read in the same
	// transaction, so the workflow needs no round trip to load it.
	Graph json.RawMessage
	// TraceParent is the W3C traceparent of the request that enqueued the
	// item, empty when it was not traced; the start continues its trace.
	TraceParent string
	// Claimer is the fence the claim was made under, with its term: the
	// item's marking must still hold it. Zero for an unfenced claim, and
	// for an item settled by someone other than its claimer.
	Claimer Fence
}

// ClaimResult is what one admission transaction did.
type ClaimResult struct {
	Claimed []ClaimedItem
	// Failed are items failed for good because their workspace or
	// definition is gone.
	Failed int
	// Workspaces is how many workspaces the store's prefilter found with
	// pending work and, by its counts, a free slot (or no longer existing).
	// Workspaces the counts show as full are not visited at all.
	Workspaces int
	// AtCapacity is how many of them admission found without a free slot
	// once locked and recounted.
	AtCapacity int
	// Refused counts, by plan, the workspaces with pending work that got
	// no slot in this claim: those the prefilter's counts showed as full
	// (never visited) and the AtCapacity ones.
	Refused map[domain.Plan]int
	// PassedOver counts, by what held them, the workspaces with pending
	// work this claim gave no start: WaitWorkspaceLimit for those without
	// a free slot (as Refused counts them), WaitStartRate for those whose
	// start rate allowed none, WaitNotBefore for those with room whose
	// items all wait for a notBefore or a back-off, WaitKeyLimit for those
	// whose due items are all held by their keys' limits or rates.
	PassedOver map[domain.WaitReason]int
	// NextDue is how long until something the claim passed over for a
	// time may go: a start rate's next start (a workspace's or a key's)
	// or a delayed item's notBefore, among the workspaces with room; 0
	// when none is. The dispatcher claims again then rather than a poll
	// later.
	NextDue time.Duration
	// More is true when a workspace took all its quota and had more items
	// it could start now: the batch's budget, not what was admissible,
	// ended the claim, so the dispatcher claims again at once.
	More bool
}

// QueueTransition is a queue item's new state computed by the domain state
// machine, to be written only if the row is still in the state it was
// computed from.
type QueueTransition struct {
	ID            domain.ID
	FromStatus    domain.QueueStatus
	FromClaimedAt *time.Time
	To            domain.QueueState
	// DropExecution is the execution of the claim being released: the
	// transition is written only while the item is still in that claim,
	// and then removes the execution's RUNNING row, freeing its slot, and
	// takes the id off the item. A start of it that lands later is refused
	// admission (ExecutionStore.AdmitRun); the next claim runs under an id
	// of its own.
	DropExecution *domain.ID
}

// DispatchedItem is an item whose workflow has started.
type DispatchedItem struct {
	ID          domain.ID
	ExecutionID domain.ID
}

// DispatchedRecord reports an item marked DISPATCHED, for the
// enqueue-to-dispatch latency and the admission wait.
type DispatchedRecord struct {
	ID           domain.ID
	CreatedAt    time.Time
	DispatchedAt time.Time
	// Plan is the item's workspace's plan, "" when the workspace is gone.
	Plan domain.Plan
	// AdmissionWait is how long the item waited while admissible (see
	// docs/admission.md#admission-wait), as stored when its start was
	// recorded; nil when none was stored.
	AdmissionWait *time.Duration
}

// AdmissionWait is a started execution's admission wait as stored (see
// docs/admission.md#admission-wait), with its workspace's plan.
type AdmissionWait struct {
	Plan domain.Plan
	Wait time.Duration
}

// DispatchStore is the dispatcher's side of storage.
type DispatchStore interface {
	// Claim runs one admission transaction of up to budget items: it
	// reads the pool's capacity and, when it has one, locks the pool
	// (before any workspace, so that claims in a bounded pool run one
	// after another and its count is exact); it fails items of vanished
	// workspaces, locks the workspaces with room
	// under their limits as stored and an item due now (skipping those
	// another dispatcher holds; those whose items all wait for a
	// notBefore or a back-off only give the claim its NextDue), reads each
	// one's limit, floor, weight, RUNNING count and start-rate bucket
	// under the lock (and, in a bounded pool, the pool's RUNNING count
	// and the slots held for floors' owners not locked), and
	// asks plan which items to take at the database's now, plan reading the
	// workspaces' admissible items through the store. Admission is decided
	// there, each item by domain.Verdict; the store decides nothing. Its
	// prefilters (QueueClaimableWorkspaces, which skips workspaces full by
	// their counts or with nothing due, and the window's walk,
	// queue_admissible_window, which passes over items due later and keys
	// held by their limits or rates) are for speed only: plan holds what
	// they drop by its verdicts all the same, and the walk's passing over
	// held keys is what lets a short window be all a workspace can start.
	// It then locks the chosen items
	// with FOR UPDATE SKIP LOCKED, hands items that cannot run to reject,
	// writes the others' executions as RUNNING and marks those items
	// CLAIMED, then commits.
	// With a non-zero fence the transaction first checks, and holds for
	// its length, that the fence's lease is still this holder's; without
	// it the claim returns ErrLeaseLost and changes nothing. The fence,
	// with the lease's current term, is recorded on each claimed item as
	// its claimer (ClaimedItem.Claimer) in the same transaction.
	Claim(ctx context.Context, fence Fence, budget int, plan PlanFunc, reject RejectFunc) (ClaimResult, error)
	// MarkDispatched moves items still CLAIMED by the given execution to
	// DISPATCHED in one statement, and returns those it moved: not those
	// the run's admission (ExecutionStore.AdmitRun) moved first. With a non-zero fence it first checks,
	// in the same transaction, that the fence's lease is still this
	// holder's and in the fence's term; otherwise it returns ErrLeaseLost
	// and marks nothing: the term's claims are the next holder's to settle.
	MarkDispatched(ctx context.Context, fence Fence, items []DispatchedItem) ([]DispatchedRecord, error)
	// ApplyTransitions writes domain-computed states, each guarded by the
	// state it came from, in one transaction; it returns the ids written.
	ApplyTransitions(ctx context.Context, ts []QueueTransition) ([]domain.ID, error)
	// ClaimsOfEndedTerms returns up to limit CLAIMED items whose claimer's
	// lease term is over (expired, released or taken over), oldest claim
	// first. Items claimed without a fence are not among them.
	ClaimsOfEndedTerms(ctx context.Context, limit int) ([]domain.QueueItem, error)
	// ForgetExpiredLeases deletes the expired leases whose names start
	// with prefix, and returns how many.
	ForgetExpiredLeases(ctx context.Context, prefix string) (int64, error)
	// StaleClaimed returns items CLAIMED for longer than olderThan.
	StaleClaimed(ctx context.Context, olderThan time.Duration, limit int) ([]domain.QueueItem, error)
	// RunningAdmittedBefore returns up to limit RUNNING executions older
	// than olderThan that come after the cursor in (AdmittedAt, ID) order,
	// for the reconciler; a zero cursor starts from the oldest.
	RunningAdmittedBefore(ctx context.Context, olderThan time.Duration, after ExecutionCursor, limit int) ([]domain.Execution, error)
	// RunningChildren returns the team workflows that the given
	// executions' RUNNING TEMPORAL_WORKFLOW nodes started, for the
	// reconciler's stuck-start rule.
	RunningChildren(ctx context.Context, executionIDs []domain.ID) ([]RunningChild, error)
	// AdmissionWaits returns, by execution, the admission wait stored
	// when the given executions' starts were recorded, for those that have
	// one: for items whose run recorded it before the marking did.
	AdmissionWaits(ctx context.Context, executionIDs []domain.ID) (map[domain.ID]AdmissionWait, error)
	// QueueStatuses returns the current status of the given items; ids not
	// found are absent from the map.
	QueueStatuses(ctx context.Context, ids []domain.ID) (map[domain.ID]domain.QueueStatus, error)
}

// ErrLeaseLost is returned by work fenced by a lease that is no longer the
// caller's: it expired, or another holder took it.
var ErrLeaseLost = errors.New("lease lost")

// Fence names the lease a transaction must still hold to act. The zero
// Fence fences nothing.
type Fence struct {
	Lease  string
	Holder string
	// Term, when set, is the term the lease must still be in: its
	// locked_at, which stays put while the holder renews and changes on
	// every new acquisition. A claim takes whatever term is current and
	// records it; the claim's marks must still be in it.
	Term time.Time
}

// Fenced reports whether f fences anything.
func (f Fence) Fenced() bool { return f.Lease != "" }

// Lease is a ShedLock-compatible named lease on database time.
type Lease interface {
	// Holder names this process in the lease table, for fencing.
	Holder() string
	// TryAcquire takes or extends the lease for atMostFor; held false
	// means another holder has it. term is the lease's term then (see
	// Fence.Term): an extension keeps it only while the lease is
	// unexpired, so a holder that renews its own lease after it expired
	// starts a new term, whose fence refuses the old term's claims.
	TryAcquire(ctx context.Context, name string, atMostFor time.Duration) (term time.Time, held bool, err error)
	// Release lets go of the lease, which stays held until atLeastFor after
	// it was taken.
	Release(ctx context.Context, name string, atLeastFor time.Duration) error
}

// Wakeups delivers a signal whenever work may have appeared: an enqueue or
// a freed slot. Signals coalesce; a missed one is covered by polling.
type Wakeups interface {
	C() <-chan struct{}
}

// Admission is what a run's first step (ExecutionStore.AdmitRun) finds.
type Admission int

const (
	// AdmissionRefused means the run's claim was released; it ends without
	// effect.
	AdmissionRefused Admission = iota
	// AdmissionGranted means the run's claim stands; it runs.
	AdmissionGranted
	// AdmissionCancelled means the run's claim stands but its item was
	// cancelled before the run started; it ends CANCELLED at once.
	AdmissionCancelled
)

// ExecutionStore is the worker's side of storage.
type ExecutionStore interface {
	// ListNodes returns up to limit node records of an execution in key
	// order, after afterKey ("" for the first page): the worker reads a
	// run's records a page at a time, so that no read grows with the run.
	ListNodes(ctx context.Context, executionID domain.ID, limit int, afterKey string) ([]domain.NodeRecord, error)
	// AdmitRun is a run's first step, before it has any effect: it
	// reports whether execution id's claim stands (its row exists, so the
	// claim was not released) and, if its item is still CLAIMED in that
	// claim, marks it DISPATCHED in the same transaction, so that no
	// release can follow. A run not admitted was started for a claim that
	// had been released (a start that left before the claimer's lease term
	// ended and landed after a peer settled it): it must end without
	// effect, and its item runs under a later claim. A run whose claim
	// stands but whose item was cancelled meanwhile (a cancel that found
	// no workflow yet, before this start landed) is AdmissionCancelled: it
	// must end CANCELLED without running a node.
	AdmitRun(ctx context.Context, id domain.ID) (Admission, error)
	GetDefinitionVersion(ctx context.Context, definitionID domain.ID, version int) (domain.DefinitionVersion, error)
	// StartNode records a node run as RUNNING (or a retry's new attempt).
	StartNode(ctx context.Context, executionID domain.ID, n domain.NodeRecord) error
	// FinishNode records how a node run ended, creating the row when the
	// node never started (SKIPPED, CANCELLED).
	FinishNode(ctx context.Context, executionID domain.ID, n domain.NodeRecord) error
	// RecordNodes writes several records of one execution: RUNNING ones
	// as StartNode does, the rest as FinishNode does (input is left as it
	// was), each with the end time given when there is one. Keys must be
	// distinct. The records are written, and told by the event stream, in
	// the order given: the workflow queues a node's record after those of
	// the nodes it waited on.
	RecordNodes(ctx context.Context, executionID domain.ID, nodes []domain.NodeRecord) error
	// FinishExecution ends a RUNNING execution and writes nodes as
	// RecordNodes does; then it hands the execution's queue item, under its
	// row lock, to atEnd and persists what atEnd decides, all in one
	// transaction, and wakes the dispatchers. atEnd is called even when
	// the execution was not RUNNING or is missing, so no item is left
	// behind a finished workflow; it is not called when there is no item.
	// found=false, with no execution or node written, when the execution
	// was not RUNNING or missing: a repeat, logged by the caller.
	FinishExecution(ctx context.Context, id domain.ID, status domain.ExecutionStatus, errMsg *string, atEnd ItemAtEndFunc, nodes ...domain.NodeRecord) (found bool, err error)
	// SetRetryOf names the execution that execution id retries;
	// ErrNotFound when either is gone.
	SetRetryOf(ctx context.Context, id, retryOf domain.ID) error
}

// ItemAtEnd is what a finished execution does to its queue item. (To
// settle, in Sluice, is only what is done to a claim in doubt: asking
// Temporal whether its start landed.)
type ItemAtEnd int

const (
	// KeepItem leaves the item as it is.
	KeepItem ItemAtEnd = iota
	// WriteItem writes the state the ItemAtEndFunc left on the item,
	// guarded by the state it was read in.
	WriteItem
	// DeleteItem deletes the item: its run completed, and a deleted item
	// can never be started again.
	DeleteItem
)

// ItemAtEndFunc decides, under the item's row lock, what the finished
// execution does to its queue item; for WriteItem it applies the domain
// transition to item first.
type ItemAtEndFunc func(item *domain.QueueItem) (ItemAtEnd, error)
