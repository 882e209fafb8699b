package maintenance

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
)

// countingKeys counts purges.
type countingKeys struct {
	mu     sync.Mutex
	purges int
}

func (k *countingKeys) PurgeIdempotencyKeys(context.Context) (int64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.purges++
	return 3, nil
}

func (k *countingKeys) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.purges
}

func TestIdempotencyKeyPurgeRunsOnlyUnderItsLease(t *testing.T) {
	t.Parallel()
	shed := apptest.NewLease()
	shed.SetOther(IdempotencyPurgeLeaseName, true)
	keys := &countingKeys{}
	p := NewIdempotencyKeyPurge(keys, shed, testSchedule(), dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
	p.loop.ran.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if p.loop.ran.Wait(t, "a turn under another process's lease") || keys.count() != 0 {
		t.Fatalf("purged %d times while another api process held the lease", keys.count())
	}
	shed.SetOther(IdempotencyPurgeLeaseName, false)
	for !p.loop.ran.Wait(t, "a turn with the lease free") {
	}
	if keys.count() == 0 {
		t.Fatal("no purge once the lease was free")
	}
	if rel := shed.Released(); len(rel) == 0 || rel[0].Name != IdempotencyPurgeLeaseName {
		t.Errorf("releases %+v, want the purge's lease", rel)
	}
}
