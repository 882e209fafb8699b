// Package dispatch is the dispatcher role: the claim loop that admits
// queue items into Temporal. It holds the loop (Dispatcher: claim a batch,
// start its workflows, mark them DISPATCHED, settle what it cannot tell),
// the planner that deals a claim between workspaces (PlanClaim, on
// domain's verdicts), the queue lease that makes one dispatcher exclusive
// and its registration leases, the takeover of an ended term's claims,
// the breaker that stops every call to Temporal while it is down, and
// their metrics. It is a package of its own so that a reader of admission
// opens it alone; the maintenance jobs read its lease, breaker and
// metrics, and nothing here reads theirs.
package dispatch
