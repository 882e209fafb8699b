package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
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
	})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(d ports.DueSchedule) (ports.TickPlan, error) { return tickPlan(tt, d) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fired, err := b.store.FireDueSchedule(ctx, nil, decide)
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

// TestAScheduledTickWhoseInputLacksTheKeyIsRefused: the firing hands
// decide the definition's concurrency; a tick's item keyed over its input
// is written with its key; a plan refused because the input lacks what the
// key reads enqueues nothing for the tick, records schedule.refused naming
// /input, and goes on to its next tick.
func TestAScheduledTickWhoseInputLacksTheKeyIsRefused(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	def, err := b.store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: b.ws, Name: "keyed",
		Graph: domain.Graph{Nodes: []domain.Node{}, Edges: []domain.Edge{}, Concurrency: &domain.Concurrency{Key: "{{ input.customer }}", Limit: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	tt := domain.IntervalTimetable{Every: time.Second}
	var dbNow time.Time
	if err = b.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	due := tt.Next(dbNow.Add(-2 * time.Second))
	schedule := func(input string) domain.Schedule {
		sc, err := b.store.CreateSchedule(ctx, domain.Schedule{
			ID: domain.ID(uuid.New()), WorkspaceID: b.ws, DefinitionID: def.ID, Name: "s", TimeZone: "UTC",
			Interval: time.Second, Input: json.RawMessage(input), Priority: 2, Overlap: domain.OverlapQueue, NextFireAt: &due,
		})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	keyed, unkeyed := schedule(`{"customer": "c-7"}`), schedule(`{"order": 1}`)
	decide := func(d ports.DueSchedule) (ports.TickPlan, error) { return tickPlan(tt, d) }
	for fired := true; fired; {
		if fired, err = b.store.FireDueSchedule(ctx, nil, decide); err != nil {
			t.Fatal(err)
		}
	}
	var key string
	var limit int
	if err = b.pool.QueryRow(ctx, `SELECT concurrency_key, concurrency_limit FROM workflow_execution_queue WHERE schedule_id = $1 LIMIT 1`, keyed.ID).
		Scan(&key, &limit); err != nil || key != "c-7" || limit != 3 {
		t.Errorf("the keyed schedule's item: key %q limit %d (%v), want c-7 and 3", key, limit, err)
	}
	var items, refusals int
	var next time.Time
	if err = b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM workflow_execution_queue WHERE schedule_id = $1),
		(SELECT count(*) FROM activity WHERE subject_id = $1 AND action = 'schedule.refused' AND details ->> 'field' = '/input'),
		(SELECT next_fire_at FROM schedules WHERE id = $1)`, unkeyed.ID).Scan(&items, &refusals, &next); err != nil {
		t.Fatal(err)
	}
	if items != 0 || refusals < 1 || !next.After(due) {
		t.Errorf("the schedule whose input lacks the key: %d items, %d refusals naming /input, next fire %s; want 0, at least 1, after %s", items, refusals, next, due)
	}
}

// TestFiringPassesOverTheSchedulesItIsToldToSkip: with one due schedule
// skipped, the lock query hands out the other and then reports nothing
// due, though the skipped one is the older tick.
func TestFiringPassesOverTheSchedulesItIsToldToSkip(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	tt := domain.IntervalTimetable{Every: time.Second}
	var dbNow time.Time
	if err := b.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	older, newer := tt.Next(dbNow.Add(-3*time.Second)), tt.Next(dbNow.Add(-2*time.Second))
	schedule := func(first time.Time) domain.Schedule {
		sc, err := b.store.CreateSchedule(ctx, domain.Schedule{
			ID: domain.ID(uuid.New()), WorkspaceID: b.ws, DefinitionID: b.def, Name: "s", TimeZone: "UTC",
			Interval: time.Second, Input: json.RawMessage(`{}`), Priority: 2, Overlap: domain.OverlapQueue, NextFireAt: &first,
		})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	skipped, fired := schedule(older), schedule(newer)
	var seen []domain.ID
	decide := func(d ports.DueSchedule) (ports.TickPlan, error) {
		seen = append(seen, d.Schedule.ID)
		return ports.TickPlan{Firing: domain.Firing{Tick: *d.Schedule.NextFireAt, Pause: true}}, nil
	}
	for {
		ok, err := b.store.FireDueSchedule(ctx, []domain.ID{skipped.ID}, decide)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if len(seen) != 1 || seen[0] != fired.ID {
		t.Errorf("decided %v, want only %s (skipping %s)", seen, fired.ID, skipped.ID)
	}
}

// tickPlan is what app decides for a due schedule (maintenance.ScheduleFiring):
// its tick, and an item of its input keyed as the definition's
// concurrency says, or the refusal of an input the key cannot read.
func tickPlan(tt domain.Timetable, d ports.DueSchedule) (ports.TickPlan, error) {
	sc := d.Schedule
	p := ports.TickPlan{Firing: sc.Fire(tt, d.Now, time.Minute, d.PreviousActive),
		Item: ports.ItemToEnqueue{ID: domain.ID(uuid.New()), WorkspaceID: sc.WorkspaceID, DefinitionID: sc.DefinitionID, Input: sc.Input, Priority: sc.Priority}}
	if c := d.Concurrency; c != nil {
		key, err := c.ResolveKey(sc.Input)
		var bad *domain.InputError
		if errors.As(err, &bad) {
			p.Refused = bad
			return p, nil
		}
		if err != nil {
			return p, err
		}
		p.Item.ConcurrencyKey, p.Item.ConcurrencyLimit, p.Item.ConcurrencyRate = &key, c.Limit, c.StartRate
	}
	return p, nil
}
