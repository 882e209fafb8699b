package app

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	shed := newFakeLease()
	shed.setOther(IdempotencyPurgeLeaseName, true)
	keys := &countingKeys{}
	p := NewIdempotencyKeyPurge(keys, shed, testSchedule(), NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
	p.loop.ran.init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if p.loop.ran.wait(t, "a turn under another process's lease") || keys.count() != 0 {
		t.Fatalf("purged %d times while another api process held the lease", keys.count())
	}
	shed.setOther(IdempotencyPurgeLeaseName, false)
	for !p.loop.ran.wait(t, "a turn with the lease free") {
	}
	if keys.count() == 0 {
		t.Fatal("no purge once the lease was free")
	}
	if rel := shed.released(); len(rel) == 0 || rel[0].name != IdempotencyPurgeLeaseName {
		t.Errorf("releases %+v, want the purge's lease", rel)
	}
}
