package dispatch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// windowWalk reads windows as the store's walk does (queue_admissible_window):
// up to four items per count, in claim order, passing over an item whose
// key has no slot left counting the key's RUNNING executions and the items
// of that key already kept.
func windowWalk(queues map[domain.ID][]domain.KeyedCandidate, reads *int) ports.WindowReader {
	return func(n map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
		*reads++
		out := map[domain.ID][]domain.KeyedCandidate{}
		for ws, k := range n {
			if k <= 0 {
				continue
			}
			taken := map[string]int{}
			for _, c := range queues[ws] {
				if c.Key != "" {
					if c.Running+taken[c.Key] >= c.Limit {
						continue
					}
					taken[c.Key]++
				}
				out[ws] = append(out[ws], c)
				if len(out[ws]) == 4*k {
					break
				}
			}
		}
		return out, nil
	}
}

// TestPlanGivesHeldWorkspacesNoShareOfTheBatch: 50 PRO workspaces with
// room whose items are all of one key at its limit, and an ENTERPRISE
// workspace with 40 items: a batch of 10 goes whole to the ENTERPRISE
// workspace, in two reads, and the plan says more could start (More) and
// that 50 workspaces were held by their keys.
func TestPlanGivesHeldWorkspacesNoShareOfTheBatch(t *testing.T) {
	t.Parallel()
	queues := map[domain.ID][]domain.KeyedCandidate{}
	var ws []ports.ClaimableWorkspace
	for range 50 {
		w := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Limit: 5, Running: 1}
		for range 200 {
			queues[w.ID] = append(queues[w.ID], domain.KeyedCandidate{ID: domain.ID(uuid.New()), Key: "held", Limit: 1, Running: 1})
		}
		ws = append(ws, w)
	}
	ent := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanEnterprise, Limit: 20}
	for range 40 {
		queues[ent.ID] = append(queues[ent.ID], domain.KeyedCandidate{ID: domain.ID(uuid.New())})
	}
	ws = append(ws, ent)
	reads := 0
	plan, err := PlanClaim(newAdmission(discardLog()).admit)(time.Now(), domain.PoolFigures{}, ws, 10, windowWalk(queues, &reads))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Chosen) != 10 || reads > 2 {
		t.Errorf("chose %d items in %d reads; want the batch of 10, in at most 2 reads", len(plan.Chosen), reads)
	}
	for _, id := range plan.Chosen {
		if !containsItem(queues[ent.ID], id) {
			t.Fatalf("chose %s, which is not the ENTERPRISE workspace's", id)
		}
	}
	if !plan.More || plan.PassedOver[domain.WaitKeyLimit] != 50 {
		t.Errorf("plan %+v; want More, and 50 workspaces passed over for their keys", plan)
	}
}

func containsItem(cs []domain.KeyedCandidate, id domain.ID) bool {
	for _, c := range cs {
		if c.ID == id {
			return true
		}
	}
	return false
}

// TestPlanHoldsEveryLimitAndLeavesNothingAdmissibleBehind checks the plan
// over 2,000 random claims (workspaces with random limits, RUNNING counts
// and start-rate room; items with random keys, key limits and RUNNING
// counts; random budgets): no workspace is given more than its free slots
// or its rate's room, no key more than its limit leaves, the batch no
// more than its budget; and a batch short of its budget left no item that
// could have started (so a batch counts full against what was admissible).
func TestPlanHoldsEveryLimitAndLeavesNothingAdmissibleBehind(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 2000 {
		queues := map[domain.ID][]domain.KeyedCandidate{}
		var ws []ports.ClaimableWorkspace
		for range 1 + rng.IntN(8) {
			limit := 1 + rng.IntN(6)
			w := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Limit: limit, Running: rng.IntN(limit + 1)}
			if rng.IntN(3) == 0 {
				room := rng.IntN(4)
				w.Rate, w.Rated, w.RateRoom = roomBucket(now, room), true, room
			}
			keyRunning := map[string]int{}
			for range rng.IntN(30) {
				c := domain.KeyedCandidate{ID: domain.ID(uuid.New())}
				if rng.IntN(3) > 0 {
					c.Key = fmt.Sprintf("k%d", rng.IntN(4))
					c.Limit = 1 + rng.IntN(2)
					if _, ok := keyRunning[c.Key]; !ok {
						keyRunning[c.Key] = rng.IntN(3)
					}
					c.Running = keyRunning[c.Key]
				}
				queues[w.ID] = append(queues[w.ID], c)
			}
			ws = append(ws, w)
		}
		budget := 1 + rng.IntN(12)
		reads := 0
		plan, err := PlanClaim(newAdmission(discardLog()).admit)(now, domain.PoolFigures{}, ws, budget, windowWalk(queues, &reads))
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Chosen) > budget {
			t.Fatalf("round %d: chose %d over a budget of %d", round, len(plan.Chosen), budget)
		}
		chosen := map[domain.ID]bool{}
		for _, id := range plan.Chosen {
			chosen[id] = true
		}
		short := false
		for _, w := range ws {
			n, byKey := 0, map[string]int{}
			for _, c := range queues[w.ID] {
				if chosen[c.ID] {
					n++
					if c.Key != "" {
						byKey[c.Key]++
						if c.Running+byKey[c.Key] > c.Limit {
							t.Fatalf("round %d: key %s over its limit %d (running %d, chosen %d)", round, c.Key, c.Limit, c.Running, byKey[c.Key])
						}
					}
				}
			}
			if n > w.Room() {
				t.Fatalf("round %d: workspace given %d over its room %d (%+v)", round, n, w.Room(), w)
			}
			// What it could have started: ChooseKeyed over every item it
			// holds, within its room.
			picks, _ := domain.ChooseKeyed(domain.WorkspaceFigures{Limit: w.Limit, Running: w.Running, Rate: w.Rate}, queues[w.ID], w.Room(), now)
			could := len(picks)
			if n < could {
				short = true
			}
		}
		if short && len(plan.Chosen) < budget {
			t.Fatalf("round %d: chose %d of a budget of %d and left items that could start", round, len(plan.Chosen), budget)
		}
	}
}

// roomBucket is a start-rate bucket (one a second, bursts of three) that
// allows room starts (0 to 3) at now.
func roomBucket(now time.Time, room int) *domain.RateBucket {
	return &domain.RateBucket{
		Rate: domain.StartRate{Rate: 1, Per: domain.PerSecond, Burst: 3},
		TAT:  now.Add(time.Duration(3-room) * time.Second),
	}
}
