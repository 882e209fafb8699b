package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// QuotaSnapshotInterval is how often a worker re-reads the quotas it
// resolves from memory: an edit of nodes in flight, the workspace share or
// the FOR_EACH cap is used by executions that start at most this long
// after it.
const QuotaSnapshotInterval = 500 * time.Millisecond

// QuotaSnapshot keeps the worker-side quotas (nodes in flight, the
// workspace's share of the external-API worker, the FOR_EACH cap) in
// memory, re-read every QuotaSnapshotInterval. The workflow reads them
// once per execution in a side effect, which must not wait on a database:
// a workflow task blocked on I/O stalls the worker's task slot and trips
// the SDK's deadlock detector. So this is the one place a quota is read
// from a cache; every other quota is read from the database where it is
// enforced. A failed refresh keeps the last snapshot and is logged.
type QuotaSnapshot struct {
	store ports.QuotaSnapshotReader
	log   *slog.Logger
	cur   atomic.Pointer[quotaSnapshot]
}

type quotaSnapshot struct {
	plans map[domain.Plan]domain.PlanQuotas
	own   map[domain.ID]domain.QuotaOverrides
}

// NewQuotaSnapshot builds the snapshot, empty until Refresh.
func NewQuotaSnapshot(store ports.QuotaSnapshotReader, log *slog.Logger) *QuotaSnapshot {
	return &QuotaSnapshot{store: store, log: log}
}

// Refresh reads the quotas now.
func (s *QuotaSnapshot) Refresh(ctx context.Context) error {
	plans, own, err := s.store.QuotaSnapshot(ctx)
	if err != nil {
		return err
	}
	s.cur.Store(&quotaSnapshot{plans: plans, own: own})
	return nil
}

// Run refreshes every QuotaSnapshotInterval until ctx ends.
func (s *QuotaSnapshot) Run(ctx context.Context) {
	t := time.NewTicker(QuotaSnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading the quotas failed; the last ones stay in force", "error", err)
			}
		}
	}
}

// Current returns the quotas in force for a workspace on plan: its own
// where set, else its plan's. False before the first Refresh, or for a
// plan the snapshot lacks.
func (s *QuotaSnapshot) Current(workspaceID domain.ID, plan domain.Plan) (domain.PlanQuotas, bool) {
	cur := s.cur.Load()
	if cur == nil {
		return domain.PlanQuotas{}, false
	}
	q, ok := cur.plans[plan]
	if !ok {
		return domain.PlanQuotas{}, false
	}
	return q.With(cur.own[workspaceID]), true
}
