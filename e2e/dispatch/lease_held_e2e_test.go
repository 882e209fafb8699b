package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestADispatcherWhoseHeartbeatDoesNotHoldTheLeaseClaimsNothing: the lease
// row is this holder's and live (a TryAcquire whose answer never reached
// the heartbeat), but the heartbeat does not know it holds the lease, so a
// dispatch batch claims nothing, rather than a claim the store's fence
// would take in the table's term and whose start the dispatcher would then
// refuse, leaving the item CLAIMED. Once the heartbeat holds the lease,
// the batch claims and starts the item.
func TestADispatcherWhoseHeartbeatDoesNotHoldTheLeaseClaimsNothing(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws, def := b.workspace(t, domain.PlanEnterprise)
	b.enqueue(t, ws, def, 1)
	shed := postgres.NewLease(b.pool, "holder-"+uuid.NewString())
	if _, held, err := shed.TryAcquire(ctx, dispatch.QueueLeaseName, time.Minute); err != nil || !held {
		t.Fatalf("taking the free lease: held %v, %v", held, err)
	}
	lease := dispatch.NewQueueLease(shed, time.Minute, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), b.log)
	cfg := testConfig()
	cfg.Exclusive = true
	metrics := dispatch.NewMetrics(prometheus.NewRegistry())
	d := dispatch.NewDispatcher(dispatch.DispatcherDeps{
		Store: b.store, Executions: b.store, Engine: b.engine, Wakeups: harness.NoWakeups{}, Lease: lease,
		Breaker: dispatch.NewBreaker(cfg.BreakerBackoff, metrics), Metrics: metrics, Log: b.log,
	}, cfg)

	res, err := d.DispatchBatch(ctx)
	if claimed := b.countStatus(t, domain.QueueClaimed); res.Claimed != 0 || claimed != 0 {
		t.Fatalf("without the heartbeat holding the lease: batch %+v, %d items CLAIMED; want none claimed", res, claimed)
	}
	if !errors.Is(err, dispatch.ErrLeaseNotHeld) {
		t.Errorf("batch without the heartbeat holding the lease: %v, want ErrLeaseNotHeld", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); lease.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the heartbeat to hold the lease", lease.Holding))
	if res, err := d.DispatchBatch(ctx); err != nil || res.Dispatched != 1 {
		t.Fatalf("with the lease held: batch %+v, %v; want the item dispatched", res, err)
	}
}
