package dispatch

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// withPool puts s's workspaces in a pool with a capacity: each gets a
// floor (0 to its limit) and a weight (1 to 4); the pool runs what they
// run and up to 10 more (other workspaces'), has up to 12 slots free, and
// holds up to 4 of them for floors' owners not locked.
func (s *verdictSnapshot) withPool(rng *rand.Rand) {
	running := 0
	for i := range s.workspaces {
		w := &s.workspaces[i]
		w.Floor, w.Weight = rng.IntN(w.Limit+1), 1+rng.IntN(4)
		running += w.Running
	}
	running += rng.IntN(11)
	s.pool = domain.PoolFigures{Bounded: true, Running: running, Capacity: max(1, running+rng.IntN(13)-1), Reserved: rng.IntN(5)}
}

// TestInAPoolTheClaimAndWaitingOnGiveTheSameVerdicts plans claims over
// 3,000 random snapshots in a pool with a capacity (random floors,
// weights, free and reserved slots, with the keys, rates and notBefores
// of randomSnapshot; every other one read without the prefilter) and
// checks every verdict the planner gave: WaitingOn on the same figures
// (the pool as the verdict met it) names the same reason with the same
// figures, and the pool a verdict met counts the starts given before it.
// Then the claim as a whole: it never starts more than the pool's free
// slots or a workspace's ceiling, borrowers never take more than the pool
// lends (its free slots less those held for floors), and nobody borrows
// while a locked workspace stays below its floor with an item it could
// have started. It prints how many verdicts of each kind it compared.
func TestInAPoolTheClaimAndWaitingOnGiveTheSameVerdicts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	compared := map[string]int{}
	for round := range 3000 {
		s := randomSnapshot(rng)
		s.withPool(rng)
		plan, err := PlanClaim(newAdmission(discardLog()).admit)(s.now, s.pool, s.workspaces, 1+rng.IntN(12), s.reader(round%2 == 0, new(int)))
		if err != nil {
			t.Fatal(err)
		}
		chosen := map[domain.ID]bool{}
		for _, id := range plan.Chosen {
			chosen[id] = true
		}
		s.comparePassedOver(t, round, plan, compared)
		started, borrowed := 0, 0
		taken := map[domain.ID]int{}
		for _, w := range s.workspaces {
			taken[w.ID] = s.replayInPool(t, round, w, plan.Decisions[w.ID], chosen, compared)
			n := taken[w.ID]
			floor := domain.FloorInForce(w.Floor, w.Limit)
			started += n
			borrowed += max(0, w.Running+n-floor) - max(0, w.Running-floor)
			if n > domain.FreeSlots(w.Limit, w.Running) {
				t.Fatalf("round %d: %d started over the workspace's ceiling (%+v)", round, n, w)
			}
		}
		if started > s.pool.Free() {
			t.Fatalf("round %d: %d started in a pool with %d free (%+v)", round, started, s.pool.Free(), s.pool)
		}
		if borrowed > s.pool.Lendable() {
			t.Fatalf("round %d: %d borrowed in a pool lending %d (%+v)", round, borrowed, s.pool.Lendable(), s.pool)
		}
		if borrowed == 0 {
			continue
		}
		for _, w := range s.workspaces {
			n := taken[w.ID]
			if w.Running+n >= domain.FloorInForce(w.Floor, w.Limit) || n >= w.Room() {
				continue
			}
			// Could it have started one more, the pool aside?
			alone := figures(w)
			if picks, _ := domain.ChooseKeyed(alone, s.everyItem(w.ID), n+1, s.now); len(picks) > n {
				t.Fatalf("round %d: %d borrowed while workspace %v stayed below its floor %d at %d with an item it could start", round, borrowed, w.ID, w.Floor, w.Running+n)
			}
		}
	}
	t.Logf("verdicts in a pool compared with WaitingOn: %v", compared)
	for _, r := range []string{"admit", string(domain.WaitPoolFull), string(domain.WaitFloorOwners), string(domain.WaitKeyLimit)} {
		if compared[r] == 0 {
			t.Fatalf("no %s verdict was compared: the snapshots do not cover it", r)
		}
	}
}

// comparePassedOver holds the planner's verdicts on whole workspaces (the
// pool full, or lending nothing to a borrower) to WaitingOn's on an item
// of each due now, on the figures the claim read.
func (s verdictSnapshot) comparePassedOver(t *testing.T, round int, plan ports.ClaimPlan, compared map[string]int) {
	t.Helper()
	want := map[domain.WaitReason]int{}
	for _, w := range s.workspaces {
		q := domain.QueueItem{ID: domain.ID{9}, WorkspaceID: w.ID, QueueState: domain.QueueState{Status: domain.QueuePending, AvailableAt: s.now}}
		if v := q.WaitingOn(domain.WaitFigures{WorkspaceLimit: w.Limit, WorkspaceRunning: w.Running, WorkspaceFloor: w.Floor, WorkspaceRate: w.Rate, Pool: s.pool}, s.now); v != nil {
			want[v.Reason]++
		}
	}
	for _, r := range []domain.WaitReason{domain.WaitPoolFull, domain.WaitFloorOwners, domain.WaitWorkspaceLimit} {
		if plan.PassedOver[r] != want[r] {
			t.Fatalf("round %d: the planner passed over %d workspaces for %s, WaitingOn says %d", round, plan.PassedOver[r], r, want[r])
		}
		compared[string(r)] += want[r]
	}
}

// replayInPool replays the planner's verdicts on w's items as WaitingOn
// gives them on the same figures, and returns how many items it took.
func (s verdictSnapshot) replayInPool(t *testing.T, round int, w ports.ClaimableWorkspace, decisions []domain.Decision, chosen map[domain.ID]bool, compared map[string]int) int {
	t.Helper()
	items := map[domain.ID]domain.QueueItem{}
	for _, q := range s.items[w.ID] {
		items[q.ID] = q
	}
	picked, pickedOfKey := 0, map[string]int{}
	for _, d := range decisions {
		q := items[d.ID]
		if d.Pool.Capacity != s.pool.Capacity || d.Pool.Reserved != s.pool.Reserved || d.Pool.Running < s.pool.Running+picked {
			t.Fatalf("round %d: item %s decided in a pool %+v, read %+v with %d started before it", round, d.ID, d.Pool, s.pool, picked)
		}
		f := domain.WaitFigures{
			WorkspaceLimit: w.Limit, WorkspaceRunning: w.Running + picked, WorkspaceFloor: w.Floor, Pool: d.Pool,
			KeyRunning: map[string]int{}, KeyTAT: map[string]time.Time{},
		}
		if w.Rate != nil {
			b := w.Rate.After(s.now, picked)
			f.WorkspaceRate = &b
		}
		if k := q.ConcurrencyKey; k != "" {
			f.KeyRunning[k] = s.keyRunning[w.ID][k] + pickedOfKey[k]
			if q.ConcurrencyRate != nil {
				f.KeyTAT[k] = domain.RateBucket{Rate: *q.ConcurrencyRate, TAT: s.keyTAT[w.ID][k]}.After(s.now, pickedOfKey[k]).TAT
			}
		}
		got := q.WaitingOn(f, s.now)
		if !sameWait(got, d.Waiting) || (got != nil && got.Reserved != d.Waiting.Reserved) {
			t.Fatalf("round %d: item %s: the planner's verdict %+v, WaitingOn on the same figures %+v", round, d.ID, d.Waiting, got)
		}
		if d.Waiting == nil {
			compared["admit"]++
			picked++
			pickedOfKey[q.ConcurrencyKey]++
			continue
		}
		compared[string(d.Waiting.Reason)]++
		if chosen[d.ID] {
			t.Fatalf("round %d: item %s taken although held by %s", round, d.ID, d.Waiting.Reason)
		}
	}
	n := 0
	for _, q := range s.items[w.ID] {
		if chosen[q.ID] {
			n++
		}
	}
	if n != picked {
		t.Fatalf("round %d: %d items taken, %d admitted by a verdict", round, n, picked)
	}
	return n
}

// everyItem is every item of ws as a window reads it, none passed over.
func (s verdictSnapshot) everyItem(ws domain.ID) []domain.KeyedCandidate {
	out := make([]domain.KeyedCandidate, 0, len(s.items[ws]))
	for _, q := range s.items[ws] {
		out = append(out, s.candidate(q))
	}
	return out
}

// TestSharesGiveFloorsFirstThenLendByWeight deals quotas in pools built
// by hand: a floor below its owner's is met first and borrowers share the
// rest by weight; slots held for floors' owners elsewhere are lent to no
// one; a pool with fewer free slots than a floor's deficit gives them all
// to the floor; a full pool gives nothing.
func TestSharesGiveFloorsFirstThenLendByWeight(t *testing.T) {
	t.Parallel()
	a, b, c := domain.ID{1}, domain.ID{2}, domain.ID{3}
	ws := func(floorA int) []ports.ClaimableWorkspace {
		return []ports.ClaimableWorkspace{
			{ID: a, Limit: 20, Floor: floorA, Weight: 1},
			{ID: b, Limit: 20, Weight: 1},
			{ID: c, Limit: 20, Weight: 3},
		}
	}
	for _, tt := range []struct {
		name string
		pool domain.PoolFigures
		a    int
		want map[domain.ID]int
	}{
		// 1.6:1.6:4.8 in whole slots.
		{"a floor of 4 first, then 8 lent 1:1:3", domain.PoolFigures{Bounded: true, Capacity: 22, Running: 10}, 4, map[domain.ID]int{a: 4 + 2, b: 1, c: 5}},
		{"3 of 5 free held for floors elsewhere", domain.PoolFigures{Bounded: true, Capacity: 15, Running: 10, Reserved: 3}, 0, map[domain.ID]int{c: 2}},
		{"fewer free slots than the floor's deficit", domain.PoolFigures{Bounded: true, Capacity: 13, Running: 10}, 5, map[domain.ID]int{a: 3}},
		{"a full pool", domain.PoolFigures{Bounded: true, Capacity: 10, Running: 10}, 5, map[domain.ID]int{}},
	} {
		got := shares(tt.pool, ws(tt.a), 100)
		for _, id := range []domain.ID{a, b, c} {
			if got[id] != tt.want[id] {
				t.Errorf("%s: quotas %v, want %v", tt.name, got, tt.want)
				break
			}
		}
	}
}
