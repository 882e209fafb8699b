package postgres_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/domain"
)

// An item's wait counts from when it became due: one enqueued an hour ago
// with a notBefore that passed ten seconds ago has waited ten seconds, and
// an item not yet due is not counted at all.
func TestOldestAdmissibleAgeCountsFromWhenTheItemBecameDue(t *testing.T) {
	b := newQueueBench(t)
	due := b.pending(t)
	if _, err := b.pool.Exec(context.Background(), `UPDATE workflow_execution_queue
		SET created_at = now() - interval '1 hour', available_at = now() - interval '10 seconds' WHERE id = $1`, due); err != nil {
		t.Fatal(err)
	}
	later := b.pending(t)
	if _, err := b.pool.Exec(context.Background(), `UPDATE workflow_execution_queue
		SET created_at = now() - interval '2 hours', available_at = now() + interval '1 hour' WHERE id = $1`, later); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(postgres.NewQueueCollector(b.pool, quiet(), false))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var age float64
	found := false
	for _, f := range families {
		if f.GetName() != "queue_oldest_admissible_age_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plan" && l.GetValue() == string(domain.PlanEnterprise) {
					age, found = m.GetGauge().GetValue(), true
				}
			}
		}
	}
	if !found {
		t.Fatalf("no queue_oldest_admissible_age_seconds for ENTERPRISE in %v", families)
	}
	if age < 10 || age > 60 {
		t.Fatalf("oldest admissible age = %.1f s, want about 10 s (due 10 s ago, enqueued 1 h ago)", age)
	}
}
