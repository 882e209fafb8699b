// Package domain holds the rules of Sluice: which queued executions may be
// dispatched to Temporal, how a queue item moves between states, what a
// workflow graph may look like, in which order its nodes run, and how node
// configuration refers to data produced earlier.
//
// The package is pure. It imports only the standard library, performs no I/O,
// reads no clock and keeps no global mutable state: every time-dependent
// method takes "now" as an argument, and every rule is a function or a method
// on a value. That keeps the rules testable without fakes and lets the
// workflow code call them during Temporal replay, where determinism is
// required.
//
// # Queue items
//
// A QueueItem is the durable record of one requested execution; its
// QueueState moves between PENDING, CLAIMED, DISPATCHED, FAILED and
// CANCELLED. Each edge has one home. SQL owns the set-based edges (the
// claim and the DISPATCHED marking of whole batches, failing every item of
// a deleted workspace, deleting the item of a completed run), because a
// per-row round trip through Go would cost the dispatcher its throughput;
// every other edge is a QueueState method (ReleaseAfterDispatchError,
// ReleaseUnstarted, Fail, Cancel, RecordOutcome) that app
// applies, through the store's update closures where the item must be
// locked, and whose result the store writes guarded by the state it was
// computed from. Adapters validate every row they load (ParseQueueStatus,
// QueueState.Validate) and call no transition. An illegal
// move returns a *TransitionError wrapping ErrIllegalTransition and leaves
// the item untouched. The diagram on QueueStatus is the whole machine.
//
// Two counters keep apart what a release means: AttemptCount counts every
// release, for observability, and DispatchFailures counts only start errors
// that belong to the item and alone is compared with MaxDispatchAttempts. A
// workspace that stays at capacity, or a Temporal outage, therefore delays
// items but never fails them.
//
// # Plan limits
//
// PlanLimits are what a Plan allows each workspace on it (WorkspaceLimits
// override them per workspace); they are data, kept in the database and
// edited by the admin. Whether an item may start is decided by one
// function, Verdict, from its AdmissionFigures (its due time, its
// workspace's limit, RUNNING count, floor and start-rate bucket, the
// Pool's figures, its key's limit, RUNNING count and bucket): admit, or
// the WaitReason with its figures.
// The claim is planned in one place, dispatch.PlanClaim, which deals the batch
// between workspaces and takes each one's items by ChooseKeyed, which
// gives every item read its Verdict; QueueItem.WaitingOn shows the same
// Verdict on the same figures, read now. A retry is never blocked
// by itself: releasing a failed dispatch drops its execution row, so the
// retry's slot is free again.
//
// # Graphs and the scheduler
//
// A Graph is a DAG of nodes (HTTP_REQUEST, TRANSFORM, CONDITION, DELAY) and
// edges. Graph.Validate reports every problem at once with JSON-pointer-like
// paths, so an API can show the user all mistakes in one response.
//
// A Scheduler is created per execution and owns all the mutable state of one
// run; nothing is shared between executions, so concurrent runs of one
// graph cannot see each other's progress. The scheduler is a pull model:
// Next returns every node whose predecessors are all resolved, sorted by key
// so that Temporal replay sees the same order, and the caller reports each
// node's end with Completed or Failed.
//
// Branching follows one rule, "a node runs when at least one of its incoming
// edges is live". An edge is dead when its source was skipped, or when its
// source is a CONDITION whose result differs from the edge's `when`. A node
// whose incoming edges are all dead is skipped, which cascades. A node with
// both live and dead incoming edges runs once all its predecessors are
// resolved. A failure stops new work; Unrun then names the nodes that never
// started.
//
// # Templates and conditions
//
// Node configuration may refer to data with templates such as
// {{ input.customer.id }} or {{ steps.fetch.output.body.items[0].id }}.
// A template is a path lookup and nothing else: there are no functions,
// operators or code. A string that is exactly one template keeps the JSON type
// of the value it names; templates inside longer strings are interpolated as
// text. A CONDITION node compares two resolved values with a fixed set of
// operators (EvaluateCondition).
//
// Resolution is bounded: what one node's templates produce is charged to a
// TemplateBudget before it is built, so a template that repeats a large
// value fails at the budget rather than at the worker's memory, and
// Graph.Validate refuses configs whose templates could never fit. Paths in
// errors are rendered only when there is an error, keeping the cost of deep
// trees linear.
//
// # Secrets
//
// SensitiveHeader, RedactHeaders and RedactURL are the one rule for what
// counts as a credential in a header or a URL, and how it is shown
// (Redacted) in records, errors and logs.
package domain
