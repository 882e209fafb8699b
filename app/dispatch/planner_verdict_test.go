package dispatch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// verdictSnapshot is a random claim snapshot: workspaces with their
// limits, RUNNING counts and start-rate buckets, and each one's PENDING
// items in claim order, with their keys' RUNNING counts and buckets.
type verdictSnapshot struct {
	now        time.Time
	workspaces []ports.ClaimableWorkspace
	items      map[domain.ID][]domain.QueueItem
	// pool is the pool the workspaces share; unbounded unless withPool.
	pool domain.PoolFigures
	// keyRunning and keyTAT are per workspace, per key.
	keyRunning map[domain.ID]map[string]int
	keyTAT     map[domain.ID]map[string]time.Time
}

// randomSnapshot draws up to 6 workspaces (limit 1 to 6, any RUNNING count
// up to it, a third with a start rate of random burst and TAT) of up to 25
// items each: two thirds keyed over 4 keys (limit 1 to 3, RUNNING 0 to 3,
// half of the keys rated), a quarter with a notBefore or a back-off ahead.
func randomSnapshot(rng *rand.Rand) verdictSnapshot {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := verdictSnapshot{
		now: now, items: map[domain.ID][]domain.QueueItem{},
		keyRunning: map[domain.ID]map[string]int{}, keyTAT: map[domain.ID]map[string]time.Time{},
	}
	randomRate := func() (domain.StartRate, time.Time) {
		r := domain.StartRate{Rate: 1 + rng.IntN(3), Per: domain.PerSecond}
		r.Burst = r.Rate + rng.IntN(3)
		// A TAT from at rest to a few seconds ahead: anything from a full
		// burst to no start now.
		return r, now.Add(time.Duration(rng.IntN(4000)-1000) * time.Millisecond)
	}
	for range 1 + rng.IntN(6) {
		limit := 1 + rng.IntN(6)
		w := ports.ClaimableWorkspace{ID: randomID(rng), Plan: domain.PlanPro, Limit: limit, Running: rng.IntN(limit + 1)}
		if rng.IntN(3) == 0 {
			r, tat := randomRate()
			w.Rate = &domain.RateBucket{Rate: r, TAT: tat}
		}
		keyLimit, keyRate := map[string]int{}, map[string]*domain.StartRate{}
		s.keyRunning[w.ID], s.keyTAT[w.ID] = map[string]int{}, map[string]time.Time{}
		for k := range 4 {
			key := fmt.Sprintf("k%d", k)
			keyLimit[key], s.keyRunning[w.ID][key] = 1+rng.IntN(3), rng.IntN(4)
			if rng.IntN(2) == 0 {
				r, tat := randomRate()
				keyRate[key], s.keyTAT[w.ID][key] = &r, tat
			}
		}
		for range rng.IntN(26) {
			q := domain.QueueItem{
				ID: randomID(rng), WorkspaceID: w.ID,
				QueueState: domain.QueueState{Status: domain.QueuePending, AvailableAt: now.Add(-time.Duration(rng.IntN(60)) * time.Second)},
			}
			if rng.IntN(4) == 0 {
				q.AvailableAt = now.Add(time.Duration(1+rng.IntN(60)) * time.Second)
				q.AttemptCount = rng.IntN(2)
			}
			if rng.IntN(3) > 0 {
				q.ConcurrencyKey = fmt.Sprintf("k%d", rng.IntN(4))
				q.ConcurrencyLimit, q.ConcurrencyRate = keyLimit[q.ConcurrencyKey], keyRate[q.ConcurrencyKey]
			}
			s.items[w.ID] = append(s.items[w.ID], q)
		}
		s.workspaces = append(s.workspaces, w)
	}
	return s
}

// candidate is q as a window reads it, with its key's figures.
func (s verdictSnapshot) candidate(q domain.QueueItem) domain.KeyedCandidate {
	c := domain.KeyedCandidate{ID: q.ID, AvailableAt: q.AvailableAt, Attempted: q.AttemptCount > 0, Key: q.ConcurrencyKey, Limit: q.ConcurrencyLimit}
	if q.ConcurrencyKey != "" {
		c.Running = s.keyRunning[q.WorkspaceID][q.ConcurrencyKey]
		if q.ConcurrencyRate != nil {
			c.Rate = &domain.RateBucket{Rate: *q.ConcurrencyRate, TAT: s.keyTAT[q.WorkspaceID][q.ConcurrencyKey]}
		}
	}
	return c
}

// reader reads windows as the store's walk does (queue_admissible_window):
// in claim order, until four items per count are kept, passing over items
// not due and items whose key has no slot or start left as the walk
// counts them. With prefilter false it hands the planner every item the
// walk went through, those it would pass over too: the same reads,
// unfiltered.
// It counts in dropped the items the prefilter passed over.
func (s verdictSnapshot) reader(prefilter bool, dropped *int) ports.WindowReader {
	return func(n map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
		out := map[domain.ID][]domain.KeyedCandidate{}
		for ws, k := range n {
			kept, ofKey := 0, map[string]int{}
			for _, q := range s.items[ws] {
				if kept == 4*k {
					break
				}
				c := s.candidate(q)
				pass := c.AvailableAt.After(s.now)
				if c.Key != "" && !pass {
					pass = c.Running+ofKey[c.Key] >= c.Limit || (c.Rate != nil && c.Rate.Room(s.now) == 0)
					if !pass {
						ofKey[c.Key]++
					}
				}
				if !pass {
					kept++
				} else if prefilter {
					*dropped++
				}
				if !pass || !prefilter {
					out[ws] = append(out[ws], c)
				}
			}
		}
		return out, nil
	}
}

// claimableWorkspaces are the workspaces the claim locks: with the
// prefilter (QueueClaimableWorkspaces), those with a free slot and an item
// due now; without it, all of them.
func (s verdictSnapshot) claimableWorkspaces(prefilter bool) []ports.ClaimableWorkspace {
	if !prefilter {
		return s.workspaces
	}
	var out []ports.ClaimableWorkspace
	for _, w := range s.workspaces {
		due := slices.ContainsFunc(s.items[w.ID], func(q domain.QueueItem) bool { return !q.AvailableAt.After(s.now) })
		if due && domain.FreeSlots(w.Limit, w.Running) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// TestTheClaimAndWaitingOnGiveTheSameVerdicts plans claims over 3,000
// random snapshots (workspaces, keys, limits, start rates and notBefores;
// random budgets; every other one read without the prefilter, so that
// items held by every rule reach the planner) and replays each verdict the planner gave: WaitingOn on
// the same figures (the snapshot, plus the starts the planner gave before
// it) names the same reason with the same figures, an item the claim took
// was admitted by it, and nothing it took breaks a limit or a rate. It
// prints how many verdicts of each kind it compared.
func TestTheClaimAndWaitingOnGiveTheSameVerdicts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	compared := map[string]int{}
	for round := range 3000 {
		s := randomSnapshot(rng)
		// Every other round unfiltered, so that the planner meets items
		// held by every rule.
		plan, err := PlanClaim(newAdmission(discardLog()).admit)(s.now, s.pool, s.workspaces, 1+rng.IntN(12), s.reader(round%2 == 0, new(int)))
		if err != nil {
			t.Fatal(err)
		}
		chosen := map[domain.ID]bool{}
		for _, id := range plan.Chosen {
			chosen[id] = true
		}
		for _, w := range s.workspaces {
			items := map[domain.ID]domain.QueueItem{}
			for _, q := range s.items[w.ID] {
				items[q.ID] = q
			}
			picked, pickedOfKey := 0, map[string]int{}
			for _, d := range plan.Decisions[w.ID] {
				q := items[d.ID]
				f := domain.WaitFigures{
					WorkspaceLimit: w.Limit, WorkspaceRunning: w.Running + picked,
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
				if !sameWait(got, d.Waiting) {
					t.Fatalf("round %d: item %s: the planner's verdict %+v, WaitingOn on the same figures %+v", round, d.ID, d.Waiting, got)
				}
				if d.Waiting == nil {
					compared["admit"]++
					picked++
					pickedOfKey[q.ConcurrencyKey]++
				} else {
					compared[string(d.Waiting.Reason)]++
					if chosen[d.ID] {
						t.Fatalf("round %d: item %s taken although held by %s", round, d.ID, d.Waiting.Reason)
					}
				}
			}
			// Every item taken was admitted by a verdict given above, so
			// the picks are those counted: no limit or rate is broken.
			n := 0
			for _, q := range s.items[w.ID] {
				if chosen[q.ID] {
					n++
				}
			}
			if n != picked {
				t.Fatalf("round %d: %d items taken, %d admitted by a verdict", round, n, picked)
			}
			if n > domain.FreeSlots(w.Limit, w.Running) || (w.Rate != nil && n > w.Rate.Room(s.now)) {
				t.Fatalf("round %d: %d taken over the workspace's limit or rate (%+v)", round, n, w)
			}
			for k, m := range pickedOfKey {
				if k != "" && s.keyRunning[w.ID][k]+m > keyLimitOf(s.items[w.ID], k) {
					t.Fatalf("round %d: key %s over its limit", round, k)
				}
			}
		}
	}
	t.Logf("verdicts compared with WaitingOn: %v", compared)
	for _, r := range []string{"admit", string(domain.WaitKeyLimit), string(domain.WaitStartRate), string(domain.WaitNotBefore), string(domain.WaitBackOff)} {
		if compared[r] == 0 {
			t.Fatalf("no %s verdict was compared: the snapshots do not cover it", r)
		}
	}
}

// TestTheClaimTakesTheSameItemsWithoutThePrefilter plans the same claims
// over 3,000 random snapshots twice: once reading as the store does (the
// workspaces prefiltered by QueueClaimableWorkspaces, the windows by the
// walk), once handed every workspace and every item the walk went
// through, those it passes over too. The items taken are the same: the
// planner holds by its verdicts what the prefilter drops, so the
// prefilter is for speed only. It prints how many items the prefilter
// dropped and how many were taken.
func TestTheClaimTakesTheSameItemsWithoutThePrefilter(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	dropped, taken := 0, 0
	for round := range 3000 {
		s := randomSnapshot(rng)
		budget := 1 + rng.IntN(12)
		filtered, err := PlanClaim(newAdmission(discardLog()).admit)(s.now, s.pool, s.claimableWorkspaces(true), budget, s.reader(true, &dropped))
		if err != nil {
			t.Fatal(err)
		}
		unfiltered, err := PlanClaim(newAdmission(discardLog()).admit)(s.now, s.pool, s.claimableWorkspaces(false), budget, s.reader(false, nil))
		if err != nil {
			t.Fatal(err)
		}
		a, b := sortedIDs(filtered.Chosen), sortedIDs(unfiltered.Chosen)
		if !slices.Equal(a, b) {
			t.Fatalf("round %d: with the prefilter the claim took %d items, without it %d (%v / %v)", round, len(a), len(b), a, b)
		}
		taken += len(a)
	}
	t.Logf("items the prefilter dropped: %d; items taken, the same either way: %d", dropped, taken)
	if dropped == 0 || taken == 0 {
		t.Fatalf("the snapshots exercise nothing: dropped %d, taken %d", dropped, taken)
	}
}

func sortedIDs(ids []domain.ID) []domain.ID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b domain.ID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func keyLimitOf(items []domain.QueueItem, key string) int {
	for _, q := range items {
		if q.ConcurrencyKey == key {
			return q.ConcurrencyLimit
		}
	}
	return 0
}

// sameWait is whether two verdicts say the same: both admit, or the same
// reason with the same figures.
func sameWait(a, b *domain.Waiting) bool {
	if a == nil || b == nil {
		return a == b
	}
	timeEq := (a.Until == nil) == (b.Until == nil) && (a.Until == nil || a.Until.Equal(*b.Until))
	rateEq := (a.Rate == nil) == (b.Rate == nil) && (a.Rate == nil || *a.Rate == *b.Rate)
	return a.Reason == b.Reason && a.Limit == b.Limit && a.Running == b.Running && a.Key == b.Key && timeEq && rateEq
}

// randomID is an id drawn from rng, so that a round's snapshot, and the
// order the planner deals workspaces in, are the same on every run.
func randomID(rng *rand.Rand) domain.ID {
	var id domain.ID
	for i := range id {
		id[i] = byte(rng.Uint32())
	}
	return id
}

// TestThePlanSaysWhichBucketsTheClaimedItemsTook plans a claim of one
// rated workspace with a rated key and an unkeyed item, claims one item
// of the two chosen (the other failed, say), and checks what the plan
// says to write: one start from the workspace's bucket and one from the
// key's when the keyed item is claimed, none from the key's otherwise, a
// key bucket a raised rate left too far ahead written capped though
// nothing started from it, and the workspace's next start as the due time.
func TestThePlanSaysWhichBucketsTheClaimedItemsTook(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perSecond := domain.StartRate{Rate: 1, Per: domain.PerSecond, Burst: 2}
	ws := ports.ClaimableWorkspace{ID: domain.ID{1}, Plan: domain.PlanPro, Limit: 5, Rate: &domain.RateBucket{Rate: perSecond}}
	keyed := domain.KeyedCandidate{ID: domain.ID{2}, Key: "a", Limit: 5, Rate: &domain.RateBucket{Rate: perSecond}}
	other := domain.KeyedCandidate{ID: domain.ID{3}}
	// Key "b"'s TAT is an hour ahead, left by a rate since raised: it
	// holds its item now, and is written capped.
	stale := domain.KeyedCandidate{ID: domain.ID{4}, Key: "b", Limit: 5, Rate: &domain.RateBucket{Rate: perSecond, TAT: now.Add(time.Hour)}}
	read := func(map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
		return map[domain.ID][]domain.KeyedCandidate{ws.ID: {keyed, other, stale}}, nil
	}
	plan, err := PlanClaim(newAdmission(discardLog()).admit)(now, domain.PoolFigures{}, []ports.ClaimableWorkspace{ws}, 5, read)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sortedIDs(plan.Chosen), []domain.ID{keyed.ID, other.ID}) {
		t.Fatalf("chosen %v, want the keyed and the unkeyed item (the workspace's burst of two)", plan.Chosen)
	}
	for _, tt := range []struct {
		name      string
		claimed   domain.ID
		keyStarts int
	}{{"the keyed item claimed", keyed.ID, 1}, {"the unkeyed item claimed", other.ID, 0}} {
		taken := plan.Started([]ports.ClaimedItem{{QueueItem: domain.QueueItem{ID: tt.claimed, WorkspaceID: ws.ID, ConcurrencyKey: map[domain.ID]string{keyed.ID: "a"}[tt.claimed]}}})
		due := taken.NextDue
		got := map[string]ports.RateBucketWrite{}
		for _, w := range taken.Writes {
			got[w.Key] = w
		}
		second := now.Add(time.Second)
		if w, ok := got[""]; !ok || !w.TAT.Equal(second) {
			t.Fatalf("%s: workspace bucket %+v, want one start taken (TAT %s)", tt.name, w, second)
		}
		if w, ok := got["a"]; (tt.keyStarts == 1) != ok || ok && !w.TAT.Equal(second) {
			t.Fatalf("%s: key bucket %+v written %v, want %d start taken", tt.name, w, ok, tt.keyStarts)
		}
		if w, ok := got["b"]; !ok || !w.TAT.Equal(perSecond.Take(stale.Rate.TAT, now, 0)) || !w.TAT.Before(now.Add(time.Hour)) {
			t.Fatalf("%s: the stale key bucket %+v written %v, want it capped", tt.name, w, ok)
		}
		if due != 0 {
			t.Fatalf("%s: due %s, want 0: the workspace's burst of two has a start left", tt.name, due)
		}
		t.Logf("%s: %d buckets written", tt.name, len(taken.Writes))
	}
}

// TestThePlanSaysWhenItsOwnRatesLetEachClaimedItemGo claims four items
// of a workspace whose start rate held them (ten a second with a burst
// of twelve, its bucket 50 ms behind now, so three starts are allowed,
// since 250, 150 and 50 ms ago), one of them under a key whose own rate let it go only 20 ms
// ago, and checks when the plan says the rates let each go: the later of
// the two buckets', by each bucket's count of starts in claim order; and
// nothing for an item enqueued, or due, after its turn came, nor for a
// workspace whose bucket was at rest.
func TestThePlanSaysWhenItsOwnRatesLetEachClaimedItemGo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	tenPerSecond := domain.StartRate{Rate: 10, Per: domain.PerSecond, Burst: 10}
	held := ports.ClaimableWorkspace{ID: domain.ID{1}, Plan: domain.PlanPro, Limit: 10,
		Rate: &domain.RateBucket{Rate: domain.StartRate{Rate: 10, Per: domain.PerSecond, Burst: 12}, TAT: ago(50 * time.Millisecond)}}
	atRest := ports.ClaimableWorkspace{ID: domain.ID{2}, Plan: domain.PlanPro, Limit: 10, Rate: &domain.RateBucket{Rate: tenPerSecond}}
	keyed := domain.KeyedCandidate{ID: domain.ID{12}, Key: "a", Limit: 5,
		Rate: &domain.RateBucket{Rate: domain.StartRate{Rate: 1, Per: domain.PerSecond, Burst: 1}, TAT: ago(20 * time.Millisecond)}}
	read := func(map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
		return map[domain.ID][]domain.KeyedCandidate{held.ID: {{ID: domain.ID{11}}, keyed, {ID: domain.ID{13}}}, atRest.ID: {{ID: domain.ID{21}}}}, nil
	}
	plan, err := PlanClaim(newAdmission(discardLog()).admit)(now, domain.PoolFigures{}, []ports.ClaimableWorkspace{held, atRest}, 10, read)
	if err != nil {
		t.Fatal(err)
	}
	item := func(id, ws domain.ID, key string, created, available time.Time) ports.ClaimedItem {
		it := ports.ClaimedItem{QueueItem: domain.QueueItem{ID: id, WorkspaceID: ws, ConcurrencyKey: key, CreatedAt: created}, ExecutionID: domain.ID{id[0], 0xe}}
		it.AvailableAt = available
		return it
	}
	taken := plan.Started([]ports.ClaimedItem{
		// The first start the held bucket allowed, since 250 ms ago.
		item(domain.ID{11}, held.ID, "", ago(10*time.Second), ago(10*time.Second)),
		// The second (since 150 ms ago), under key "a", since 20 ms ago.
		item(domain.ID{12}, held.ID, "a", ago(10*time.Second), ago(10*time.Second)),
		// The third (since 50 ms ago), due only 10 ms ago: not held.
		item(domain.ID{13}, held.ID, "", ago(10*time.Second), ago(10*time.Millisecond)),
		// A bucket at rest held nothing back.
		item(domain.ID{21}, atRest.ID, "", ago(10*time.Second), ago(10*time.Second)),
	})
	want := map[domain.ID]time.Time{{11, 0xe}: ago(250 * time.Millisecond), {12, 0xe}: ago(20 * time.Millisecond)}
	if len(taken.RateAllowedAt) != len(want) {
		t.Fatalf("rates let go %v, want %v", taken.RateAllowedAt, want)
	}
	for id, at := range want {
		if got := taken.RateAllowedAt[id]; !got.Equal(at) {
			t.Fatalf("execution %v let go at %s, want %s (all: %v)", id, got, at, taken.RateAllowedAt)
		}
	}
}
