// Package maintenance is the background jobs that keep the queue and the
// stores in order, each on its own schedule, most under their own lease,
// one file a job: stale recovery (claims whose workflow never started) and
// the reconciler (executions whose workflow ended unseen), the schedules'
// firing, the retention purge, the feed and idempotency-key purges, and
// the webhook sender. cmd/sluice/service says which role runs which: the
// dispatcher the first three, the API the purges, the worker the sender.
// It is apart from the claim loop because no job decides admission: the
// jobs that ask Temporal read the dispatcher's breaker and metrics
// (app/dispatch), and the claim loop reads nothing of theirs.
package maintenance
