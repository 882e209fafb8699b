package maintenance

import (
	"context"
	"time"
)

// askTemporal puts one question to Temporal (one call to the engine)
// and waits at most within for its answer: a Temporal that accepts
// connections but never answers would otherwise hold the job that asked,
// and every rule that job runs, for ever. Stale recovery and the
// reconciler ask every question through it, within the dispatcher's
// SLUICE_DISPATCH_START_TIMEOUT, which bounds the claim loop's own
// questions. The engine answers a question cut short as
// ports.ErrEngineUnavailable (with ports.ErrEngineTimeout); a job takes
// that, as any unavailable answer, for the end of its run, never for a
// verdict on what it asked about.
func askTemporal(ctx context.Context, within time.Duration, question func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return question(ctx)
}
