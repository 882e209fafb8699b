package maintenance

import (
	"context"
	"time"
)

// PurgePass bounds one pass of a job that deletes rows past their period
// (retention, the feed's purge, the webhook deliveries'): each statement
// deletes at most BatchSize rows in its own short transaction, so no
// statement holds its locks long and the writers it meets wait one batch
// at most; the pass repeats them until nothing past its period remains
// or Budget is spent, so it keeps up with any insert rate its batches
// can outrun, and a backlog it cannot clear in one pass is left to the
// next rather than holding the job's lease past its term.
type PurgePass struct {
	// BatchSize is the rows one statement deletes at most.
	BatchSize int
	// Budget bounds a pass's time.
	Budget time.Duration
}

// DefaultPurgePass deletes 1,000 rows a statement for at most 20 seconds
// a pass: a third of the jobs' default minute, and well inside their
// leases' two.
func DefaultPurgePass() PurgePass {
	return PurgePass{BatchSize: 1000, Budget: 20 * time.Second}
}

// purgeStep is one kind of row a pass deletes: it deletes at most limit
// rows past their period, in one statement, counts them on its metric as
// it goes (so a reader who sees the rows gone sees them counted), and
// says how many.
type purgeStep func(ctx context.Context, limit int) (int, error)

// run deletes through every step in turn, one batch each a round, until
// each has come back short (nothing past its period remains), the budget
// is spent by the clock now, or a step fails. Taking the steps in turn
// keeps one kind's backlog from spending the pass the others need.
// caughtUp says every step came back short.
func (p PurgePass) run(ctx context.Context, now func() time.Time, steps []purgeStep) (caughtUp bool, err error) {
	done := make([]bool, len(steps))
	left := len(steps)
	deadline := now().Add(p.Budget)
	for left > 0 {
		for i, step := range steps {
			if done[i] {
				continue
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if !now().Before(deadline) {
				return false, nil
			}
			n, err := step(ctx, p.BatchSize)
			if err != nil {
				return false, err
			}
			if n < p.BatchSize {
				done[i] = true
				left--
			}
		}
	}
	return true, nil
}
