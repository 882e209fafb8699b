package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// dueSchedules is a ScheduleStore whose due schedules are always due, in
// order; a schedule in breaking fails its tick after decide has seen it,
// as an enqueue that cannot read its definition does. It records the
// ticks fired, by schedule.
type dueSchedules struct {
	ports.ScheduleStore
	due      []domain.Schedule
	breaking map[domain.ID]bool
	fired    map[domain.ID]int
}

func (s *dueSchedules) FireDueSchedule(_ context.Context, skip []domain.ID, decide func(ports.DueSchedule) (ports.TickPlan, error)) (bool, error) {
	for i, sc := range s.due {
		if slices.Contains(skip, sc.ID) {
			continue
		}
		if _, err := decide(ports.DueSchedule{Schedule: sc, Now: *sc.NextFireAt, DefinitionLive: true}); err != nil {
			return false, err
		}
		if s.breaking[sc.ID] {
			return false, errors.New("reading the definition's concurrency: bad json")
		}
		s.fired[sc.ID]++
		s.due = slices.Delete(s.due, i, i+1)
		return true, nil
	}
	return false, nil
}

// TestAFailingScheduleIsPassedOverAndTheOthersFire: the failing schedule
// is the oldest due, where the lock query would hand it out first every
// time; the turn still fires every other schedule, and passes the failing
// one over until its back-off ends, doubling.
func TestAFailingScheduleIsPassedOverAndTheOthersFire(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	schedule := func() domain.Schedule {
		return domain.Schedule{ID: domain.ID(uuid.New()), Interval: time.Minute, NextFireAt: &tick, Overlap: domain.OverlapQueue}
	}
	broken, others := schedule(), []domain.Schedule{schedule(), schedule(), schedule()}
	store := &dueSchedules{due: append([]domain.Schedule{broken}, others...), breaking: map[domain.ID]bool{broken.ID: true}, fired: map[domain.ID]int{}}
	now := tick
	f := NewScheduleFiring(store, nil, &apptest.Lease{}, DefaultScheduleFiringConfig(), nil, discardLog())
	f.now = func() time.Time { return now }

	f.fireDue(context.Background())
	for _, sc := range others {
		if store.fired[sc.ID] != 1 {
			t.Errorf("schedule %s fired %d ticks in a turn behind a failing one, want 1", sc.ID, store.fired[sc.ID])
		}
	}
	if b := f.failing[broken.ID]; b.wait != firstScheduleRetry || !b.until.Equal(now.Add(firstScheduleRetry)) {
		t.Errorf("the failing schedule's back-off = %+v, want %s from now", b, firstScheduleRetry)
	}
	if skip := f.passedOver(); !slices.Equal(skip, []domain.ID{broken.ID}) {
		t.Errorf("passed over %v, want the failing schedule only", skip)
	}

	// Its back-off over, it is tried again, fails again and waits twice
	// as long; once it fires, it is forgotten.
	now = now.Add(firstScheduleRetry)
	f.fireDue(context.Background())
	if b := f.failing[broken.ID]; b.wait != 2*firstScheduleRetry {
		t.Errorf("after a second failure the back-off is %s, want %s", b.wait, 2*firstScheduleRetry)
	}
	delete(store.breaking, broken.ID)
	now = now.Add(2 * firstScheduleRetry)
	f.fireDue(context.Background())
	if store.fired[broken.ID] != 1 || len(f.failing) != 0 {
		t.Errorf("the mended schedule fired %d ticks and %d schedules are still failing, want 1 and 0", store.fired[broken.ID], len(f.failing))
	}
}

// TestAScheduleTickBuildsItsItemWithTheConstructor: the firing's decision
// (no longer the Postgres adapter) builds the tick's item with
// queue.NewItem, and turns an input the key cannot read into a refusal.
func TestAScheduleTickBuildsItsItemWithTheConstructor(t *testing.T) {
	t.Parallel()
	ws, def := domain.ID(uuid.New()), domain.ID(uuid.New())
	firing := NewScheduleFiring(nil, nil, nil, DefaultScheduleFiringConfig(), nil, discardLog())
	byCustomer := &domain.Concurrency{Key: "{{ input.customer }}", Limit: 3, StartRate: &domain.StartRate{Rate: 5, Per: domain.PerSecond, Burst: 5}}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	due := now.Add(-time.Second)
	due1 := ports.DueSchedule{Now: now, DefinitionLive: true, Concurrency: byCustomer, Schedule: domain.Schedule{
		ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def, Interval: time.Minute, Overlap: domain.OverlapQueue,
		Input: json.RawMessage(`{"customer": "c-7"}`), Priority: 4, NextFireAt: &due}}
	plan, err := firing.decide(due1)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Firing.Enqueue || plan.Refused != nil {
		t.Fatalf("the due tick's plan %+v, want an item", plan)
	}
	apptest.CheckBuilt(t, "schedule tick", plan.Item, "c-7", byCustomer, 4)
	if plan.Item.WorkspaceID != ws || plan.Item.DefinitionID != def || plan.Item.Actor != (domain.Actor{}) {
		t.Errorf("schedule tick: item %+v, want the schedule's workspace and definition, no actor", plan.Item)
	}

	// An input the key cannot read is the plan's refusal, naming /input.
	due1.Schedule.Input = json.RawMessage(`{"order": 1}`)
	if plan, err = firing.decide(due1); err != nil {
		t.Fatal(err)
	}
	if plan.Refused == nil || len(plan.Refused.Problems) != 1 || plan.Refused.Problems[0].Path != "/input" || !plan.Firing.Enqueue {
		t.Errorf("a tick whose input lacks the key: %+v, want its refusal at /input", plan)
	}
}
