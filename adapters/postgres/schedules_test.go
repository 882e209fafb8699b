package postgres_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TestConcurrentFiringsFireEachTickOnce: four firing loops with no lease
// between them (as when a lease holder paused past its term and a new one
// took over) drain a schedule 30 ticks behind: each tick gets exactly one
// item, from the row lock and the advance in the item's transaction alone.
func TestConcurrentFiringsFireEachTickOnce(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	tt := domain.IntervalTimetable{Every: time.Second}
	var dbNow time.Time
	if err := b.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	first := tt.Next(dbNow.Add(-31 * time.Second))
	sc, err := b.store.CreateSchedule(ctx, domain.Schedule{
		ID: domain.ID(uuid.New()), WorkspaceID: b.ws, DefinitionID: b.def, Name: "behind", TimeZone: "UTC",
		Interval: time.Second, Input: json.RawMessage(`{}`), Priority: 2, Overlap: domain.OverlapQueue, NextFireAt: &first,
	}, domain.DefaultQuotas())
	if err != nil {
		t.Fatal(err)
	}
	decide := func(d ports.DueSchedule) (domain.Firing, error) {
		return d.Schedule.Fire(tt, d.Now, time.Minute, d.PreviousActive), nil
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fired, err := b.store.FireDueSchedule(ctx, domain.DefaultQuotas(), decide)
				if err != nil {
					t.Error(err)
					return
				}
				if !fired {
					return
				}
			}
		}()
	}
	wg.Wait()
	var n, distinct int
	var last time.Time
	if err := b.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT schedule_tick), max(schedule_tick) FROM workflow_execution_queue WHERE schedule_id = $1`, sc.ID).
		Scan(&n, &distinct, &last); err != nil {
		t.Fatal(err)
	}
	want := int(last.Sub(first)/time.Second) + 1
	if n != distinct || n != want || n < 30 {
		t.Errorf("%d items for %d distinct ticks, want one for each of the %d ticks from %s to %s", n, distinct, want, first, last)
	}
}
