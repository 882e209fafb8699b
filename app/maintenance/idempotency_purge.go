package maintenance

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/ports"
)

// IdempotencyKeyPurge forgets Idempotency-Keys past their retention. The
// keys are the API's, so the api role runs it; the purgeIdempotencyKeys
// lease keeps it to one process however many API processes there are.
type IdempotencyKeyPurge struct {
	keys ports.IdempotencyKeyStore
	log  *slog.Logger
	loop maintenance
}

// NewIdempotencyKeyPurge builds the purge.
func NewIdempotencyKeyPurge(keys ports.IdempotencyKeyStore, lease ports.Lease, schedule JobSchedule,
	leaseMetrics *dispatch.LeaseMetrics, log *slog.Logger) *IdempotencyKeyPurge {
	p := &IdempotencyKeyPurge{keys: keys, log: log}
	p.loop = maintenance{name: IdempotencyPurgeLeaseName, lease: lease, schedule: schedule, metrics: leaseMetrics, log: log, job: p.run}
	return p
}

// Run purges on the schedule until ctx ends.
func (p *IdempotencyKeyPurge) Run(ctx context.Context) { p.loop.run(ctx) }

func (p *IdempotencyKeyPurge) run(ctx context.Context) {
	n, err := p.keys.PurgeIdempotencyKeys(ctx)
	if err != nil {
		p.log.Error("purging idempotency keys failed", "error", err)
		return
	}
	if n > 0 {
		p.log.Info("purged idempotency keys", "count", n)
	}
}
